"""A failed build says what failed and why first, on stderr; then the failing step once, the last
lines that carry an error, and the fix known for the error's class."""

from __future__ import annotations

import pytest

from envman.images.failure import CLASSES, summarize

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
    monkeypatch.setattr(CB, "_stacks", lambda names, all_, platform: [__import__("envman.stack.resolve", fromlist=["x"]).resolve(mini, "torch-2.4-cpu")])
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
