"""The builders (envman.engine.builder) and the BuildKit dialect of the render, without a daemon.

A fake ``docker`` executable (a Python script on a private PATH) stands in for the CLI: it
records its argv, the stdin it was given and what it saw of the secret files, and prints
BuildKit's plain progress as Debian's docker.io 20.10 CLI does.
"""

from __future__ import annotations

import io
import json
import os
import stat
import sys
import tarfile
from pathlib import Path

import pytest

from envman.engine.builder import (
    BuildKitBuilder, BuildKitCli, ClassicBuilder, PlainProgressParser, builder_for_render, engine_has_buildkit,
    find_buildkit_cli, select_builder,
)
from envman.config import load_builder_config
from envman.errors import BuildError, RenderError, UserError
from envman.render.dockerfile import NETRC_SECRET, render_hash, render_stack
from envman.render.options import RenderOptions

from envman.engine.api import EngineInfo
from tests.support.fake_engine import FakeEngine
from tests.support.index_server import make_wheel

from tests.unit.render.test_dockerfile import make_stack as stack

# Real output of `DOCKER_BUILDKIT=1 docker build --progress=plain` (docker.io 20.10), shortened.
PLAIN = """\
#1 [internal] load remote build context
#1 DONE 2.3s

#2 copy /context /
#2 transferring context: 191.80MB 2.1s
#2 DONE 2.4s

#4 [stage-0 1/5] FROM docker.io/library/ubuntu:22.04
#4 CACHED

#5 [stage-0 2/5] RUN --mount=type=cache,id=envman-apt-lists-ubuntu22.04,target=/var/lib/apt/lists,sharing=locked     set -eu;     apt-get update
#5 0.992 Get:1 http://deb.example/debian bookworm InRelease [151 kB]
#5 DONE 34.8s

#7 [stage-0 4/5] RUN --mount=type=cache,id=envman-pip,target=/var/cache/envman/pip     set -eu;     pip install torch==2.13.0
#7 3.112 Downloading torch (191.8 MB)
#7 sha256:4f9b6c1a 10.49MB / 191.80MB 0.5s
#7 DONE 18.0s

#9 exporting to image
#9 exporting layers 9.9s done
#9 writing image sha256:2d771db6c95e462304be2f832afda889f985be24053d17ee63dfce94b4c6d34c done
#9 naming to docker.io/envman/x:abc done
#9 DONE 9.9s
"""
IMAGE = "sha256:2d771db6c95e462304be2f832afda889f985be24053d17ee63dfce94b4c6d34c"


def parse(text: str) -> tuple[list, PlainProgressParser]:
    p = PlainProgressParser(tag="envman/x:abc")
    events = [e for line in text.splitlines() for e in p.feed(line)]
    return events, p


def test_plain_progress_becomes_the_same_events_as_the_classic_stream():
    events, p = parse(PLAIN)
    steps = [(e.step, e.text) for e in events if e.kind == "step"]
    assert [s for s, _ in steps] == ["1/5", "2/5", "4/5"]
    assert steps[1][1].startswith("Step 2/5 : RUN --mount=type=cache")
    logs = {e.text: e.step for e in events if e.kind == "log"}
    assert logs["Get:1 http://deb.example/debian bookworm InRelease [151 kB]"] == "2/5"  # output keeps its step
    assert logs["Downloading torch (191.8 MB)"] == "4/5"
    progress = [(e.step, e.text) for e in events if e.kind == "progress"]
    assert ("4/5", "sha256:4f9b6c1a 10.49MB / 191.80MB 0.5s") in progress
    assert (None, "transferring context: 191.80MB 2.1s") in progress
    done = p.finish(0)
    assert done[-1].kind == "done" and done[-1].image_id == IMAGE


def test_a_failed_step_is_a_build_error_with_its_message_and_the_log_tail():
    text = PLAIN.split("#9 exporting")[0] + (
        "#8 [stage-0 5/5] RUN false\n#8 0.31 about to fail\n#8 ERROR: executor failed running [/bin/sh -c false]: exit code: 1\n"
        "------\n > [stage-0 5/5] RUN false:\n------\n"
        "error: failed to solve: rpc error: code = Unknown desc = executor failed running [/bin/sh -c false]: exit code: 1\n")
    _, p = parse(text)
    with pytest.raises(BuildError) as info:
        p.finish(1)
    assert "executor failed running" in info.value.what and "\n" not in info.value.what
    assert "about to fail" in info.value.log_tail


def test_a_cli_that_fails_before_any_vertex_says_so():
    _, p = parse("ERROR: BuildKit is enabled but the buildx component is missing or broken.\n")
    with pytest.raises(BuildError, match="buildx component is missing"):
        p.finish(1)
    _, p = parse("#1 DONE 0.0s\n")
    with pytest.raises(BuildError, match="without an image id"):
        p.finish(0)


# --------------------------------------------------------------------------- the docker CLI

FAKE_DOCKER = r'''#!{python}
import json, os, stat, sys
here = os.path.dirname(os.path.abspath(__file__))
version, buildx = {version!r}, {buildx!r}
args = sys.argv[1:]
if args == ["--version"]:
    print("Docker version %s, build 297e128" % version); sys.exit(0)
if args[:2] == ["buildx", "version"]:
    if buildx:
        print("github.com/docker/buildx v0.10.4"); sys.exit(0)
    print("docker: 'buildx' is not a docker command.", file=sys.stderr); sys.exit(1)
rec = {{"argv": args, "env": {{k: os.environ.get(k) for k in ("DOCKER_BUILDKIT", "DOCKER_HOST")}}, "secrets": []}}
for i, a in enumerate(args):
    if a == "--secret":
        src = dict(kv.split("=", 1) for kv in args[i + 1].split(","))["src"]
        st, dst = os.stat(src), os.stat(os.path.dirname(src))
        rec["secrets"].append({{"src": src, "mode": oct(stat.S_IMODE(st.st_mode)), "dir_mode": oct(stat.S_IMODE(dst.st_mode)),
                                "data": open(src).read()}})
    if a == "--iidfile":
        iid = args[i + 1]
data = sys.stdin.buffer.read()
rec["stdin_bytes"] = len(data)
open(os.path.join(here, "record.json"), "w").write(json.dumps(rec))
fail = os.environ.get("FAKE_DOCKER_FAIL")
print("#1 [internal] load remote build context\n#1 DONE 0.1s\n")
print("#4 [stage-0 1/2] FROM docker.io/library/ubuntu:22.04\n#4 CACHED\n")
print("#5 [stage-0 2/2] RUN --mount=type=secret,id=envman-netrc,target=/root/.netrc echo hi\n#5 0.52 hi")
if fail:
    print("#5 ERROR: executor failed running [/bin/sh -c echo hi]: exit code: 1")
    print("error: failed to solve: executor failed running [/bin/sh -c echo hi]: exit code: 1", file=sys.stderr)
    sys.exit(1)
print("#5 DONE 0.6s\n\n#6 exporting to image\n#6 exporting layers 0.1s done\n#6 DONE 0.1s")
open(iid, "w").write("sha256:" + "ab" * 32)
'''


def fake_docker(directory: Path, *, version: str = "20.10.24+dfsg1", buildx: bool = False) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "docker"
    path.write_text(FAKE_DOCKER.format(python=sys.executable, version=version, buildx=buildx))
    path.chmod(0o755)
    return path


def test_the_first_cli_with_buildx_wins_else_an_old_cli_else_none(tmp_path):
    new, old, plugin = tmp_path / "new", tmp_path / "old", tmp_path / "plugin"
    fake_docker(new, version="28.2.2")
    fake_docker(old, version="20.10.24+dfsg1")
    fake_docker(plugin, version="27.0.1", buildx=True)
    assert find_buildkit_cli(f"{new}{os.pathsep}{old}") == BuildKitCli(str(old / "docker"), False)
    assert find_buildkit_cli(f"{new}{os.pathsep}{old}{os.pathsep}{plugin}") == BuildKitCli(str(plugin / "docker"), True)
    assert find_buildkit_cli(str(new)) is None  # 23.0+ without buildx cannot build with BuildKit
    assert find_buildkit_cli(str(tmp_path / "nothing")) is None


def info_engine(api: str = "1.41", os_name: str = "Debian GNU/Linux 12 (bookworm)", kind: str = "docker") -> FakeEngine:
    """The shared fake engine saying which Engine API version and OS it runs."""
    return FakeEngine(engine_info=EngineInfo(kind=kind, server_version="27.3.1", version="27.3.1", api_version=api,
                                             os=os_name))


def test_select_builder_auto_buildkit_classic():
    cli = BuildKitCli("/usr/bin/docker", False)
    assert select_builder(info_engine(), "auto", cli=cli).kind == "buildkit"
    assert select_builder(info_engine(), "auto", cli=None).kind == "classic"
    assert select_builder(info_engine(api="1.38"), "auto", cli=cli).kind == "classic"
    assert isinstance(select_builder(info_engine(), "classic", cli=cli), ClassicBuilder)
    chosen = select_builder(info_engine(), "buildkit", cli=cli)
    assert isinstance(chosen, BuildKitBuilder) and chosen.host == FakeEngine.url
    for engine, c, why in ((info_engine(), None, "no docker CLI"), (info_engine(api="1.30"), cli, "does not serve BuildKit")):
        with pytest.raises(UserError, match=why) as info:
            select_builder(engine, "buildkit", cli=c)
        assert "\n" not in info.value.line() and "--builder" in info.value.line()
    with pytest.raises(UserError, match="unknown builder"):
        select_builder(info_engine(), "kaniko", cli=cli)
    podman = info_engine(kind="podman")
    assert select_builder(podman, "auto", cli=cli).kind == "classic"
    with pytest.raises(UserError, match="Podman"):
        select_builder(podman, "buildkit", cli=cli)
    assert not engine_has_buildkit(EngineInfo(api_version="1.41", os="Windows Server 2022"))
    assert not engine_has_buildkit(EngineInfo(api_version="garbage"))
    assert engine_has_buildkit(EngineInfo(api_version="1.39", os="Debian GNU/Linux 12 (bookworm)"))


def test_the_buildkit_builder_sends_the_context_on_stdin_and_secrets_as_private_files(tmp_path):
    docker = fake_docker(tmp_path / "bin")
    builder = BuildKitBuilder(BuildKitCli(str(docker), False), "unix:///run/fake.sock")
    tar = b"x" * 12345
    events = list(builder.build(tar, "envman/x:abc", labels={"envman.name": "x"}, secrets={NETRC_SECRET: b"machine h login u password Zq9-s3cret-pw\n"},
                                platform="linux/arm64"))
    rec = json.loads((tmp_path / "bin" / "record.json").read_text())
    assert rec["stdin_bytes"] == len(tar)
    assert rec["env"] == {"DOCKER_BUILDKIT": "1", "DOCKER_HOST": "unix:///run/fake.sock"}
    argv = rec["argv"]
    assert argv[0] == "build" and argv[-3:] == ["-f", "Dockerfile", "-"] and "--progress=plain" in argv
    assert argv[argv.index("--platform") + 1] == "linux/arm64" and argv[argv.index("--label") + 1] == "envman.name=x"
    # the secret's path is on the argv, never its content (a word no temporary name can hold by chance)
    assert not any("Zq9-s3cret-pw" in a or "password" in a for a in argv)
    (sec,) = rec["secrets"]
    assert sec["mode"] == "0o600" and sec["dir_mode"] == "0o700" and sec["data"] == "machine h login u password Zq9-s3cret-pw\n"
    assert not Path(sec["src"]).exists() and not Path(sec["src"]).parent.exists()  # removed afterwards
    assert [e.step for e in events if e.kind == "step"] == ["1/2", "2/2"]
    assert events[-1].kind == "done" and events[-1].image_id == "sha256:" + "ab" * 32


def test_a_failing_buildkit_build_raises_with_the_tail_and_cleans_up(tmp_path, monkeypatch):
    docker = fake_docker(tmp_path / "bin")
    monkeypatch.setenv("FAKE_DOCKER_FAIL", "1")
    builder = BuildKitBuilder(BuildKitCli(str(docker), True), "unix:///run/fake.sock")
    seen = []
    with pytest.raises(BuildError, match="executor failed running") as info:
        for ev in builder.build(b"tar", "envman/x:abc", labels={}, secrets={NETRC_SECRET: b"s"}):
            seen.append(ev)
    assert seen[-1].kind == "error" and "hi" in info.value.log_tail
    rec = json.loads((tmp_path / "bin" / "record.json").read_text())
    assert rec["argv"][:3] == ["buildx", "build", "--load"]
    assert not Path(rec["secrets"][0]["src"]).parent.exists()


def test_classic_builder_refuses_secrets_and_foreign_labels_are_refused_on_buildkit(tmp_path):
    with pytest.raises(UserError, match="cannot pass build secrets"):
        ClassicBuilder(info_engine()).build(b"", "t:1", labels={}, secrets={"a": b"b"})  # type: ignore[arg-type]
    builder = BuildKitBuilder(BuildKitCli(str(fake_docker(tmp_path / "bin")), False), "unix:///x")
    with pytest.raises(UserError, match="outside the envman"):
        list(builder.build(b"", "t:1", labels={"com.example": "x"}))
    with pytest.raises(UserError, match="secret id"):
        list(builder.build(b"", "t:1", labels={}, secrets={"../etc": b"x"}))


def test_builder_config_key_and_render_default(tmp_path, monkeypatch):
    cfg = tmp_path / "config.toml"
    assert load_builder_config(cfg) == "auto"
    cfg.write_text('[build]\nbuilder = "classic"\n')
    assert load_builder_config(cfg) == "classic"
    cfg.write_text('[build]\nbuilder = "kaniko"\n')
    with pytest.raises(UserError, match=r"\[build\].builder"):
        load_builder_config(cfg)
    assert builder_for_render("classic") == "classic" and builder_for_render("buildkit") == "buildkit"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert builder_for_render("auto") == "classic"


# --------------------------------------------------------------------------- the BuildKit dialect


@pytest.fixture
def wheelhouse(tmp_path) -> Path:
    d = tmp_path / "wheels"
    d.mkdir()
    name = "torch-2.4.1+cu124-cp310-cp310-linux_x86_64.whl"
    (d / name).write_bytes(make_wheel(name, [])[0])
    return d


@pytest.fixture
def ca_file(tmp_path) -> Path:
    p = tmp_path / "ca.pem"
    p.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    return p


def test_buildkit_mounts_the_wheelhouse_and_ca_and_copies_neither(wheelhouse, ca_file):
    o = RenderOptions(wheelhouse=wheelhouse, ca_bundle=ca_file)
    bk = render_stack(stack(), o, builder="buildkit")
    classic = render_stack(stack(), o)
    assert "COPY wheels/" in classic.dockerfile and "COPY envman/ca-bundle.crt" in classic.dockerfile
    assert "COPY wheels/" not in bk.dockerfile and "COPY envman/ca-bundle.crt" not in bk.dockerfile
    assert "--mount=type=bind,source=wheels,target=/opt/envman/wheels" in bk.dockerfile
    assert "--mount=type=bind,source=envman/ca-bundle.crt,target=/run/envman/ca-bundle.crt" in bk.dockerfile
    assert "update-ca-certificates" not in bk.dockerfile and "PIP_CERT=\"" not in bk.dockerfile
    assert "sharing=locked" in bk.dockerfile and "id=envman-apt-lists-ubuntu22.04" in bk.dockerfile
    assert "--no-cache-dir" not in bk.dockerfile and "--cache-dir /var/cache/envman/pip" in bk.dockerfile
    for ctx in (bk, classic):
        assert "# syntax" not in ctx.dockerfile.lower() and not ctx.dockerfile.startswith("#syntax")
        assert render_hash(ctx.files) == ctx.render_hash  # the same content-addressed scheme
    assert bk.render_hash != classic.render_hash and bk.builder == "buildkit" and classic.builder == "classic"


def test_uv_installs_from_python_3_8_and_pip_below():
    assert '"$uv" pip install --offline' in render_stack(stack(), builder="buildkit").dockerfile
    old = stack(python="3.6", name="torch-1.0.1-cuda10.0-py3.6", row="torch-1.0.1-cuda10.0", os="ubuntu18.04",
                base_image="nvidia/cuda:10.0-base-ubuntu18.04", cuda="10.0", minor_compat=False, min_driver="410.48")
    text = render_stack(old, builder="buildkit").dockerfile
    assert "uv pip install" not in text and "pip install --cache-dir /var/cache/envman/pip" in text


@pytest.mark.parametrize("key", ["pip_index", "pip_extra_index", "framework_index"])
def test_index_credentials_become_a_netrc_secret_outside_the_context_and_hash(key):
    with_creds = RenderOptions(**{key: "https://alice:pa%24%24w0rd@pypi.corp.example/simple"})
    other = RenderOptions(**{key: "https://bob:other@pypi.corp.example/simple"})
    ctx = render_stack(stack(), with_creds, builder="buildkit")
    assert ctx.secrets == {NETRC_SECRET: b"machine pypi.corp.example login alice password pa$$w0rd\n"}
    assert ctx.render_hash == render_stack(stack(), other, builder="buildkit").render_hash  # credentials are no content
    blob = ctx.tar() + b"".join(ctx.files.values()) + repr(ctx).encode()
    assert b"pa$$w0rd" not in blob and b"pa%24%24w0rd" not in blob and b"alice" not in blob
    assert f"--mount=type=secret,id={NETRC_SECRET},target=/root/.netrc" in ctx.dockerfile
    with pytest.raises(RenderError, match="classic builder would keep"):
        render_stack(stack(), with_creds)


def test_two_logins_for_one_host_are_refused_and_odd_credentials_too():
    o = RenderOptions(pip_index="https://a:1@idx.example/simple", pip_extra_index="https://b:2@idx.example/extra")
    with pytest.raises(RenderError, match="different credentials"):
        render_stack(stack(), o, builder="buildkit")
    same = RenderOptions(pip_index="https://a:1@idx.example/simple", pip_extra_index="https://a:1@idx.example/extra")
    assert render_stack(stack(), same, builder="buildkit").secrets[NETRC_SECRET].count(b"machine") == 1
    with pytest.raises(UserError, match="space, quote"):
        RenderOptions(pip_index="https://a:b%20c@idx.example/simple")
    with pytest.raises(UserError) as info:
        RenderOptions(pip_index="https://a b:c@idx.example/simple")
    assert "c@" not in info.value.line()


def test_offline_buildkit_binds_the_wheelhouse_for_the_python_step_too(tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    for name in ("torch-2.4.1+cu124-cp310-cp310-linux_x86_64.whl", "torchvision-0.19.1+cu124-cp310-cp310-linux_x86_64.whl",
                 "pip-24.0-py3-none-any.whl"):
        (d / name).write_bytes(make_wheel(name, [])[0])
    text = render_stack(stack(), RenderOptions(wheelhouse=d, offline=True), builder="buildkit").dockerfile
    python_step = text.split("# 2. Python")[1].split("\n# 3. ")[0]
    assert "--mount=type=bind,source=wheels" in python_step and "--no-index --find-links /opt/envman/wheels" in python_step


def test_tar_of_a_buildkit_context_holds_the_wheels_for_the_bind_mount(wheelhouse):
    ctx = render_stack(stack(), RenderOptions(wheelhouse=wheelhouse), builder="buildkit")
    with tarfile.open(fileobj=io.BytesIO(ctx.tar())) as tar:
        names = tar.getnames()
        mode = stat.S_IMODE(tar.getmember("envman/entrypoint.sh").mode)
    assert "wheels/torch-2.4.1+cu124-cp310-cp310-linux_x86_64.whl" in names and mode == 0o755


def test_buildkit_builds_from_an_image_id_through_a_tag_named_after_it(tmp_path):
    from envman.engine.builder import from_image_id

    image_id = "sha256:" + "c0" * 32
    files = {"Dockerfile": f"# x\nFROM {image_id}\nRUN true\n".encode(), "requirements.txt": b"six==1.17.0\n"}
    by_id = f"envman/by-id:{'c0' * 32}"
    engine = FakeEngine()
    engine.add_image("envman/s:latest", image_id)  # the promoted image the project builds on
    bk = BuildKitBuilder(BuildKitCli("/usr/bin/docker", False), "unix:///x")
    with from_image_id(engine, bk, files, image_id) as buildable:  # type: ignore[arg-type]
        assert buildable["Dockerfile"] == f"# x\nFROM {by_id}\nRUN true\n".encode()
        assert buildable["requirements.txt"] == files["requirements.txt"]
        assert engine.inspect_image(by_id).id == image_id
    assert engine.removed == [by_id] and engine.tag_names() == {"envman/s:latest"}  # only the tag went
    with pytest.raises(RuntimeError), from_image_id(engine, bk, files, image_id):
        raise RuntimeError("the build failed")
    assert engine.removed == [by_id, by_id] and not engine.image_exists(by_id)  # the tag goes even when the build fails
    classic = FakeEngine()
    classic.add_image("envman/s:latest", image_id)
    with from_image_id(classic, ClassicBuilder(classic), files, image_id) as same:  # type: ignore[arg-type]
        assert same == files and classic.tag_names() == {"envman/s:latest"}
    assert classic.removed == []
    with pytest.raises(UserError), from_image_id(engine, bk, {"Dockerfile": b"FROM sha256:zz\n"}, "sha256:zz"):
        pass


# --------------------------------------------------------------------------- the buildx probe, kept


@pytest.fixture
def probes(tmp_path, monkeypatch):
    """A docker CLI on PATH that logs every call; its answer is kept at once (no settling time);
    ``ask()`` is a new process asking which CLI builds with BuildKit."""
    import envman.engine.builder as builder

    log = tmp_path / "calls.log"
    cli_dir = tmp_path / "bin"
    fake_docker(cli_dir, version="27.0.1", buildx=True)
    script = cli_dir / "docker"
    script.write_text(script.read_text().replace("args = sys.argv[1:]", f"open({str(log)!r}, 'a').write('x\\n')\nargs = sys.argv[1:]", 1))
    monkeypatch.setattr(builder, "PROBE_SETTLED_NS", 0)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker-config"))
    monkeypatch.delenv("ENVMAN_RUN_CACHE", raising=False)

    def ask():
        builder._find_buildkit_cli.cache_clear()
        before = len(log.read_text().splitlines()) if log.exists() else 0
        got = find_buildkit_cli(str(cli_dir))
        return got, len(log.read_text().splitlines()) - before if log.exists() else 0

    return {"ask": ask, "cli": script, "config": tmp_path / "docker-config"}


def test_the_probes_answer_is_kept_while_nothing_it_depends_on_changes(probes):
    first, calls = probes["ask"]()
    assert first == BuildKitCli(str(probes["cli"]), True) and calls >= 1
    assert probes["ask"]() == (first, 0)  # a new process: no CLI run


@pytest.mark.parametrize("change", ["cli rewritten", "plugin installed", "config written", "caches off",
                                    "extra plugin folders"])
def test_any_change_the_answer_depends_on_probes_again(probes, monkeypatch, change):
    probes["ask"]()
    if change == "cli rewritten":
        probes["cli"].write_text(probes["cli"].read_text() + "\n")
    elif change == "plugin installed":
        (probes["config"] / "cli-plugins").mkdir(parents=True)
        (probes["config"] / "cli-plugins" / "docker-buildx").write_text("#!/bin/sh\n")
    elif change == "config written":
        probes["config"].mkdir()
        (probes["config"] / "config.json").write_text("{}")
    elif change == "caches off":
        monkeypatch.setenv("ENVMAN_RUN_CACHE", "0")
    else:
        probes["config"].mkdir()
        (probes["config"] / "config.json").write_text('{"cliPluginsExtraDirs": ["/opt/plugins"]}')
    got, calls = probes["ask"]()
    assert got == BuildKitCli(str(probes["cli"]), True) and calls >= 1
    if change in ("caches off", "extra plugin folders"):  # and nothing is kept for next time either
        assert probes["ask"]()[1] >= 1


def test_a_cli_changed_a_moment_ago_is_probed_every_time(probes, monkeypatch):
    import envman.engine.builder as builder

    monkeypatch.setattr(builder, "PROBE_SETTLED_NS", 60 * 10**9)  # the fake CLI was written just now
    probes["ask"]()
    assert probes["ask"]()[1] >= 1


def test_buildkits_plain_progress_lines_carry_no_terminal_escapes():
    from envman.engine.builder import PlainProgressParser

    p = PlainProgressParser(tag="t")
    events = p.feed("#5 1.2 \x1b[33mWARNING: apt does not have a stable CLI\x1b[0m")
    assert [e.text for e in events] == ["WARNING: apt does not have a stable CLI"] and "\x1b" not in p.log_tail
