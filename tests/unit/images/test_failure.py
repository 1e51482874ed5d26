"""A failed build says what failed and why first, on stderr; then the failing step once, the last
lines that carry an error, and the fix known for the error's class."""

from __future__ import annotations

import pytest

from envman.images.failure import CLASSES, reason_of, summarize

SCRIPT = "set -eu; /opt/venv/bin/uv pip install --index-url https://pypi.corp.example/simple torch==2.4.1"

BUILDKIT = f"""#8 [stage-0 5/9] RUN {SCRIPT}
#8 0.512 Using Python 3.10.12 environment at /opt/venv
#8 1.204 error: Failed to fetch: `https://pypi.corp.example/simple/torch/`
#8 1.204   Caused by: Request failed after 3 retries
#8 1.204   Caused by: {{cause}}
#8 ERROR: process "/bin/sh -c {SCRIPT}" did not complete successfully: exit code: 2
------
 > [stage-0 5/9] RUN {SCRIPT}:
#8 1.204   Caused by: {{cause}}
------
Dockerfile:40
--------------------
  40 | >>> RUN {SCRIPT}
--------------------
error: failed to solve: process "/bin/sh -c {SCRIPT}" did not complete successfully: exit code: 2"""

CLASSIC = f"""Step 12/21 : RUN {SCRIPT}
 ---> Running in 0123456789ab
Looking in indexes: https://pypi.corp.example/simple
{{cause}}
The command '/bin/sh -c {SCRIPT}' returned a non-zero code: 1"""

CAUSES = {
    "tls": ["invalid peer certificate: UnknownIssuer",
            "SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed'))",
            "x509: certificate signed by unknown authority"],
    "resolver": ["ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/",
                 "ERROR: No matching distribution found for torch==2.4.1",
                 "× No solution found when resolving dependencies: Because torch==2.4.1 depends on sympy and you require sympy<1, we can conclude"],
    "network": ["Temporary failure in name resolution",
                "dial tcp: lookup pypi.corp.example: no such host; connection refused",
                "Could not resolve host: pypi.corp.example"],
}


@pytest.mark.parametrize("log", [BUILDKIT, CLASSIC], ids=["buildkit", "classic"])
@pytest.mark.parametrize("kind, cause", [(k, c) for k, cs in CAUSES.items() for c in cs])
def test_every_known_error_class_gets_its_hint_the_step_once_and_the_cause(log, kind, cause):
    f = summarize("the build failed", log.format(cause=cause))
    assert f.error_class == kind and f.hint == next(c.hint for c in CLASSES if c.name == kind)
    shown = "\n".join(f.lines())
    assert shown.count(SCRIPT) == 1 and f.step.endswith(SCRIPT)  # the script once, as the step
    assert " ".join(cause.split()) in shown
    assert len(f.errors) <= 8


def test_an_unknown_error_gets_the_step_and_its_lines_without_a_guess():
    f = summarize("x", CLASSIC.format(cause="Segmentation fault (core dumped): error 139"))
    assert f.error_class is None and f.hint is None and f.step.startswith("Step 12/21 : RUN")
    assert any("Segmentation fault" in e for e in f.errors)


def test_the_step_the_builder_reported_wins_over_the_log():
    """The failing step's header may have scrolled out of the log tail: the builder's last step
    event names it."""
    f = summarize("x", "error: Failed to fetch\nCaused by: invalid peer certificate: UnknownIssuer", step="Step 5/9 : RUN x")
    assert f.step == "Step 5/9 : RUN x" and f.error_class == "tls"


def test_the_cli_puts_a_failure_on_stderr_cause_first(tmp_path, monkeypatch, mini, capsys):
    import typer

    from envman.cli import build as CB
    from envman.engine import builder as EB
    from envman.errors import BuildError
    from envman.images import build as B
    from tests.support.fake_engine import FakeContext, FakeEngine

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "s"))
    log = BUILDKIT.format(cause="invalid peer certificate: UnknownIssuer")
    what = f'process "/bin/sh -c {SCRIPT}" did not complete successfully: exit code: 2'
    eng = FakeEngine(fail_build=True, build_error=BuildError(what, log_tail=log))

    from tests.support.fake_engine import patch_connect

    patch_connect(monkeypatch, eng)
    monkeypatch.setattr(EB, "select_builder", lambda engine, pref, **k: type("B", (), {"kind": "classic"})())
    monkeypatch.setattr(B, "_render", lambda stack, *a, **k: FakeContext("ab" * 32))
    import envman.images.stacks as IS

    monkeypatch.setattr(IS, "select_stacks", lambda source, names, all_, platform: [__import__("envman.stack.resolve", fromlist=["x"]).resolve(mini, "torch-2.4-cpu")])
    with pytest.raises(typer.Exit):
        CB.build(type("Ctx", (), {"obj": None})(), names=["torch-2.4-cpu"], all_=False, jobs=1, no_cache=False,
                 pull=False, require_gpu=False, accept_cpu_only=False, platform=None, registry_mirror=None,
                 ca_bundle=None, pip_index=None, pip_extra_index=None, framework_index=None, wheelhouse=None,
                 offline=None, apt_mirror=None, python_mirror=None, builder=None, as_json=False)
    out, err = capsys.readouterr()
    assert "UnknownIssuer" not in out and "failed" not in out  # nothing of it on stdout
    lines = [line for line in err.splitlines() if line.strip()]
    first = next(i for i, line in enumerate(lines) if "build failed" in line)
    assert "a TLS certificate is not trusted" in lines[first]
    assert " ".join(err.split()).count(SCRIPT) <= 1 and err.count("failing step: ") == 1  # the step once
    assert lines[first + 1].startswith("  failing step: ")
    assert "UnknownIssuer" in err and "--ca-bundle" in err.splitlines()[-1]


def test_a_failed_project_build_on_the_run_path_shows_why_after_its_one_line(capsys):
    """A project image that fails to build during `envman run` said "log tail above" and showed
    none: the error line now comes first, then the step, the error lines and the hint."""
    from envman.boundary import guarded
    from envman.errors import BuildError

    def fail():
        raise BuildError("project image of demo failed to build: the step failed", where="/p/envman.toml",
                         log_tail=CLASSIC.format(cause="ERROR: No matching distribution found for einops==99"),
                         fix="check the apt packages, requirements and envman.lock")

    assert guarded(fail) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("envman: error: the requirements conflict: /p/envman.toml: project image of demo")
    assert err[1].startswith("  failing step: Step 12/21 : RUN")
    assert any("No matching distribution found for einops==99" in line for line in err)
    assert err[-1].startswith("  hint: the requirements cannot be installed")


NVIDIA_APT_LINES = [
    "E: Failed to fetch https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/InRelease  "
    "Could not resolve 'developer.download.nvidia.com'",
    "W: Failed to fetch https://developer.download.nvidia.com/compute/cuda/repos/ubuntu1804/x86_64/InRelease  "
    "Connection timed out [IP: 152.199.39.144 443]",
    "curl: (6) Could not resolve host: developer.download.nvidia.com",
]


@pytest.mark.parametrize("line", NVIDIA_APT_LINES)
def test_nvidia_apt_repository_unreachable_gets_the_hint_that_helps(line):
    """None of --registry-mirror, --pip-index or --apt-mirror reaches NVIDIA's apt repository: the
    generic network hint sent the user round in circles."""
    from envman.images.failure import DOCS_NO_REGISTRY

    f = summarize("the build failed", CLASSIC.format(cause=line))
    assert f.error_class == "nvidia-apt" and DOCS_NO_REGISTRY in f.hint
    other = summarize("x", CLASSIC.format(cause="Could not resolve host: pypi.corp.example"))
    assert other.error_class == "network"
    # the repository named without a failure is no failure of it
    ok = summarize("x", CLASSIC.format(cause="Get:1 https://developer.download.nvidia.com/x InRelease; error 139"))
    assert ok.error_class != "nvidia-apt"


REGISTRY_LINES = [  # what BuildKit and the classic builder print when Docker Hub cannot be reached
    'ERROR: failed to do request: Head "https://registry-1.docker.io/v2/nvidia/cuda/manifests/12.8.2-base-ubuntu24.04": '
    "dial tcp: lookup registry-1.docker.io on 10.0.0.53:53: no such host",
    "failed to solve with frontend dockerfile.v0: failed to create LLB definition: failed to resolve source metadata "
    "for docker.io/nvidia/cuda:12.8.2-base-ubuntu24.04: dial tcp 1.2.3.4:443: i/o timeout",
    'Get "https://registry-1.docker.io/v2/": net/http: request canceled while waiting for connection (Client.Timeout '
    "exceeded while awaiting headers) timed out",
    'Error response from daemon: Get "https://mirror.corp.example:5000/v2/": dial tcp: lookup mirror.corp.example: '
    "no such host",
]


@pytest.mark.parametrize("line", REGISTRY_LINES)
def test_a_registry_out_of_reach_points_to_the_base_made_without_one(line):
    """The generic network hint named pip and apt options, none of which reaches a registry; a
    machine with no registry at all has one way out (envman base make)."""
    from envman.images.failure import DOCS_NO_REGISTRY

    f = summarize("the build failed", CLASSIC.format(cause=line))
    assert f.error_class == "registry" and DOCS_NO_REGISTRY in f.hint and "envman base make" in f.hint
    assert reason_of("registry") == "a container registry could not be reached"


@pytest.mark.parametrize("line", [
    # a tag the registry does not have is no network failure
    "failed to resolve source metadata for docker.io/nvidia/cuda:99.0-base-ubuntu24.04: docker.io/nvidia/cuda:99.0-"
    "base-ubuntu24.04: not found",
    "Could not resolve host: pypi.corp.example",  # an index, not a registry
])
def test_a_registry_answer_or_an_index_failure_is_not_a_registry_out_of_reach(line):
    assert summarize("x", CLASSIC.format(cause=line)).error_class != "registry"


def _slug(title: str) -> str:
    import re

    return re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", title.strip().lower()))


def test_every_docs_section_a_hint_names_exists():
    from pathlib import Path

    from envman.images import failure

    root = Path(__file__).resolve().parents[3]
    for name in ("DOCS_NETWORK", "DOCS_NO_REGISTRY"):
        path, anchor = getattr(failure, name).split("#")
        headings = [_slug(line.lstrip("#")) for line in (root / path).read_text().splitlines() if line.startswith("#")]
        assert anchor in headings, (name, anchor)
    hints = [c.hint for c in CLASSES if c.name in ("network", "nvidia-apt")]
    assert failure.DOCS_NETWORK in hints[1] and failure.DOCS_NO_REGISTRY in hints[0]


def test_a_hint_the_error_line_already_gives_is_not_printed_again(capsys):
    """A failed base rebuild carries its class's hint as its fix: the network hint came twice."""
    from envman.boundary import guarded
    from envman.errors import BuildError
    from envman.images.base import failure_fix

    tail = CLASSIC.format(cause="Could not resolve host: pypi.corp.example")
    exc = BuildError("rebuilding nvidia/cuda:10.0-base-ubuntu18.04 from NVIDIA's recipe failed: x", log_tail=tail)
    exc.fix = failure_fix(exc)

    def fail():
        raise exc

    assert guarded(fail) == exc.exit_code
    err = capsys.readouterr().err
    hint = next(c.hint for c in CLASSES if c.name == "network")
    assert err.count(hint) == 1, err
    # a hint the line does not give is still printed, once
    exc2 = BuildError("the build failed", log_tail=tail, fix="see the log")
    guarded(lambda: (_ for _ in ()).throw(exc2))
    assert capsys.readouterr().err.count(hint) == 1
