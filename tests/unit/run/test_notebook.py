"""Tests of ``envman/run/notebook.py``, moved unchanged from the former ``test_daily_use.py``
(which tested several modules)."""

from __future__ import annotations

import io
import os
import sys

import pytest

from envman.errors import UserError
from envman.run.plan import docker_argv
from tests.unit.run.test_envs import plan  # noqa: F401 (shared with that file)


def test_notebook_layer_and_command():
    from envman.run.notebook import JUPYTERLAB, notebook_command, notebook_dockerfile, notebook_image_ref, notebook_url

    df = notebook_dockerfile("sha256:" + "a" * 64)
    assert df.splitlines()[1] == "FROM sha256:" + "a" * 64 and JUPYTERLAB in df and "# syntax" not in df
    a, b = notebook_image_ref("p", "sha256:" + "a" * 64), notebook_image_ref("p", "sha256:" + "b" * 64)
    assert a.startswith("envman/notebook-p:") and a != b  # a new base image: a new layer
    cmd = notebook_command(1000)
    assert "--ip=0.0.0.0" in cmd and "--no-browser" in cmd and "--allow-root" not in cmd
    assert not any("token" in w.lower() for w in cmd)  # the token travels as JUPYTER_TOKEN, by name
    assert "--allow-root" in notebook_command(0)
    assert notebook_url(9999, "ab") == "http://127.0.0.1:9999/lab?token=ab"


def test_notebook_token_is_passed_by_name_only():
    argv = docker_argv(plan(inherit_env=("JUPYTER_TOKEN",)))
    assert argv[argv.index("JUPYTER_TOKEN") - 1] == "--env" and not any(w.startswith("JUPYTER_TOKEN=") for w in argv)


def test_notebook_port_checks():
    import socket

    from envman.run.notebook import check_port, free_port

    with pytest.raises(UserError, match="outside"):
        check_port(80)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(UserError, match="in use"):
            check_port(s.getsockname()[1])
    p = free_port()
    assert check_port(p) == p


_ONE_ANSWER_SERVER = """
import socket, sys, time
time.sleep(float(sys.argv[2]))  # the server takes a while to come up
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
c, _ = s.accept(); c.recv(100); c.sendall(b"HTTP/1.0 403 Forbidden\\r\\n\\r\\n"); c.close()
sys.exit(int(sys.argv[3]))
"""


@pytest.mark.parametrize("code", [0, 3])
def test_notebook_prints_its_url_only_once_the_server_answers(tmp_path, code):
    """The URL was printed before Jupyter answered. Now the server runs in a child and the URL
    comes once it answers HTTP; the exit code is the server's."""
    from envman.run.notebook import free_port, serve_and_announce

    port = free_port()
    out = tmp_path / "out"
    pid = os.fork()
    if pid == 0:  # a child of the test, so that its stdout can be a file
        fd = os.open(out, os.O_WRONLY | os.O_CREAT)
        os.dup2(fd, 1)
        sys.stdout = open(1, "w", closefd=False)
        start = lambda: os.execv(sys.executable, [sys.executable, "-c", _ONE_ANSWER_SERVER, str(port), "0.5", str(code)])
        got = serve_and_announce(start, port, lambda: f"URL {port}\n", timeout=60)
        os._exit(got)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == code
    assert out.read_text() == f"URL {port}\n"


def test_waiting_for_a_server_ends_when_it_exits_or_times_out():
    from envman.run.notebook import answers_http, free_port, wait_until_ready

    port = free_port()
    assert not answers_http(port)
    assert wait_until_ready(port, 60, alive=lambda: False) == "exited"
    assert wait_until_ready(port, 0, alive=lambda: True, pause=0) == "timeout"


_SERVER_UNTIL_INTERRUPTED = """
import os, signal, socket, sys, time
signal.signal(signal.SIGINT, lambda *a: os._exit(42))
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
c, _ = s.accept(); c.recv(100); c.sendall(b"HTTP/1.0 200 OK\\r\\n\\r\\n"); c.close()
time.sleep(120)
"""


def test_ctrl_c_sent_to_envman_notebook_reaches_the_server():
    """The server runs in a child: an INT sent to envman (Ctrl-C, or a supervisor) is forwarded to
    it, and envman ends with the server's code."""
    import signal
    import time

    from envman.run.notebook import free_port, serve_and_announce

    port = free_port()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1)
        sys.stdout = open(1, "w", closefd=False)
        start = lambda: os.execv(sys.executable, [sys.executable, "-c", _SERVER_UNTIL_INTERRUPTED, str(port)])
        os._exit(serve_and_announce(start, port, lambda: "ready\n", timeout=60))
    os.close(w)
    with os.fdopen(r) as out:
        assert out.readline() == "ready\n"  # the server answered
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + 60
        while (done := os.waitpid(pid, os.WNOHANG)) == (0, 0) and time.monotonic() < deadline:
            time.sleep(0.05)
    if done == (0, 0):
        os.kill(pid, signal.SIGKILL)
        pytest.fail("envman notebook did not end after Ctrl-C")
    assert os.waitstatus_to_exitcode(done[1]) == 42


JUPYTER_LOG = """[I 2026-11-28 11:50:01.862 ServerApp] Serving notebooks from local directory: /workspace
[I 2026-11-28 11:50:01.862 ServerApp] Jupyter Server 2.14.2 is running at:
[I 2026-11-28 11:50:01.862 ServerApp] http://d680e93ed800:8888/lab?token=...
[I 2026-11-28 11:50:01.862 ServerApp]     http://127.0.0.1:8888/lab?token=...
[I 2026-11-28 11:50:01.862 ServerApp] Use Control-C to stop this server and shut down all kernels (twice to skip confirmation).
[C 2026-11-28 11:50:01.866 ServerApp]

    To access the server, open this file in a browser:
        file:///home/envman/.local/share/jupyter/runtime/jpserver-7-open.html
    Or copy and paste one of these URLs:
        http://d680e93ed800:8888/lab?token=...
        http://127.0.0.1:8888/lab?token=...
[I 2026-11-28 11:50:09.001 ServerApp] 302 GET /lab (127.0.0.1) 1.20ms
[W 2026-11-28 11:50:10.002 ServerApp] a kernel on http://pypi.example:8080/simple said hello
"""


def test_the_notebook_shows_jupyters_log_but_not_its_unreachable_urls():
    """Jupyter printed its own :8888 URLs (its port inside the container, unreachable) before
    envman's real one."""
    from envman.run.notebook import copy_shown

    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "w") as w:
        w.write(JUPYTER_LOG)
    out = io.StringIO()
    copy_shown(read_end, out)
    shown = out.getvalue()
    assert ":8888" not in shown and "jpserver" not in shown and "copy and paste" not in shown
    assert "Serving notebooks from local directory: /workspace" in shown
    assert "302 GET /lab" in shown and "http://pypi.example:8080/simple" in shown
    assert "Use Control-C to stop this server" in shown


def test_a_notebook_layer_planted_under_its_tag_is_not_run_as_mine(tmp_path, monkeypatch):
    """Attack (F4, the notebook layer): ``build_notebook_image`` reuses any image under
    ``envman/notebook-<project name>:<hash of the base image id>``. The name is what any file
    claims (no root hash) and the base image id is the shared stack image's, so a neighbour
    computes the tag without knowing anything of the victim's and plants an image there;
    ``envman notebook`` then serves the victim's project (and its Jupyter token) from it."""
    from envman.run.notebook import build_notebook_image, notebook_image_ref
    from tests.support.fake_engine import FakeEngine

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    base = "sha256:" + "b" * 64
    e = FakeEngine.with_images({notebook_image_ref("demo", base): "sha256:" + "e" * 64})
    from envman.errors import EnvmanError

    try:
        build_notebook_image(e, "demo", base)
    except EnvmanError:  # a refusal is an answer too; a silent reuse is not
        return
    assert e.build_calls, "the planted notebook layer was reused without a build of this user's"


def test_the_notebook_layer_is_reused_only_when_mine_and_run_by_its_id(tmp_path, monkeypatch):
    """Boundaries: the layer this user built on this base is reused (no second build) and named by
    its image ID, so a tag moved after the build changes nothing; the same tag moved to another
    image, or a base other than the one recorded, makes a build."""
    from envman.run.notebook import build_notebook_image, notebook_image_ref
    from tests.support.fake_engine import FakeEngine

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    base = "sha256:" + "b" * 64
    e = FakeEngine()
    first = build_notebook_image(e, "demo", base)
    assert first.startswith("sha256:") and first == e.inspect_image(notebook_image_ref("demo", base)).id
    assert build_notebook_image(e, "demo", base) == first and len(e.build_calls) == 1
    planted = e.add_image(None, "sha256:" + "e" * 64)
    e.tag(planted, notebook_image_ref("demo", base))
    again = build_notebook_image(e, "demo", base)
    assert len(e.build_calls) == 2 and again != planted


def _notebook_world(tmp_path, monkeypatch):
    """``envman notebook`` up to its hand-over, with everything before it stood in for: what
    ``serve_and_announce`` was given, and the argv its ``start`` execs."""
    from contextlib import nullcontext
    from dataclasses import dataclass
    from types import SimpleNamespace

    import envman.engine.docker as docker_mod
    import envman.engine.facts as facts
    import envman.engine.handoff as handoff
    import envman.project.registry as registry
    import envman.project.settings as settings_mod
    import envman.project.trust as trust
    import envman.run.command as command
    import envman.run.network as network
    import envman.run.plan as plan_mod
    import envman.run.prepare as prepare
    from envman.run import notebook

    @dataclass(frozen=True)
    class Settings:
        stack: str = "torch-2.4-cpu"
        ports: tuple = ()

    @dataclass(frozen=True)
    class Plan:
        image: str = "sha256:" + "b" * 64
        tty: bool = True
        interactive: bool = True
        inherit_env: tuple = ()

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv(notebook.TOKEN_ENV, "")
    monkeypatch.setattr(registry, "locate", lambda project: SimpleNamespace(name="demo"))
    monkeypatch.setattr(settings_mod, "load_user_config", lambda: None)
    monkeypatch.setattr(settings_mod, "merge_settings", lambda *a, **k: Settings())
    monkeypatch.setattr(trust, "project_trusted", lambda proj: True)
    monkeypatch.setattr(command, "project_image_builder", lambda *a, **k: None)
    monkeypatch.setattr(command, "build_network", lambda *a, **k: None)
    monkeypatch.setattr(facts, "docker_facts", lambda: SimpleNamespace(inspect_image=lambda ref: SimpleNamespace(id=ref)))
    monkeypatch.setattr(prepare, "prepare_run", lambda *a, **k: SimpleNamespace(problems=[], plan=Plan()))
    monkeypatch.setattr(docker_mod.Engine, "connect", classmethod(lambda cls, *a, **k: nullcontext(None)))
    monkeypatch.setattr(notebook, "build_notebook_image", lambda *a, **k: "sha256:" + "c" * 64)
    monkeypatch.setattr(plan_mod, "docker_argv", lambda plan: ["docker", "run", "--rm", plan.image])
    monkeypatch.setattr(network, "ensure_network", lambda engine, plan: None)
    seen: dict = {}

    def serve(start, port, announce, **kw):
        seen["served"] = True
        try:
            start()
        except SystemExit:
            pass
        return 0

    monkeypatch.setattr(notebook, "serve_and_announce", serve)
    monkeypatch.setattr(handoff, "exec_docker", lambda argv, env=(): seen.setdefault("argv", list(argv)) and None)
    matrix = SimpleNamespace(resolve=lambda name: SimpleNamespace(name=name, is_cpu=True))

    def run():
        notebook.notebook_cli(None, port=8899, stack=None, gpus=None, no_gpu=True, rebuild=False, dry_run=False,
                              matrix=matrix)
    return run, seen


def test_the_notebook_server_container_is_recorded_as_this_users(tmp_path, monkeypatch):
    run, seen = _notebook_world(tmp_path, monkeypatch)
    with pytest.raises(SystemExit) as out:
        run()
    assert out.value.code == 0
    argv = seen["argv"]
    assert argv[:2] == ["docker", "run"] and argv[2] == "--cidfile"
    assert os.path.dirname(argv[3]) == str(tmp_path / "state" / "containers") and argv[-1] == "sha256:" + "c" * 64


def test_a_notebook_whose_containers_folder_is_unusable_is_refused_before_its_server_starts(tmp_path, monkeypatch):
    # the server starts in a forked child: a refusal there would be that child's traceback, so
    # the folder of this user's container IDs is settled first, in one line, and nothing is started
    run, seen = _notebook_world(tmp_path, monkeypatch)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "containers").write_text("")
    with pytest.raises(UserError, match="is not a directory of yours"):
        run()
    assert "served" not in seen and "argv" not in seen
