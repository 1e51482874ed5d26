"""``envman notebook``: JupyterLab in a project's stack, on 127.0.0.1 only, with a random token.

JupyterLab is never part of a stack image: it is installed in a small layer of its own,
``envman/notebook-<project>:<hash>``, built FROM the image the project runs on (its project image
when it has one, else the promoted stack image, pinned by id) and reused while that image and the
recipe are unchanged. The server is an ``envman run`` of that image (same preflight, uid, HOME,
mounts and environment as a run) that binds 0.0.0.0 inside the container; the container port is
published on a free port of 127.0.0.1 only. The token is 32 random bytes; it reaches the container
as ``JUPYTER_TOKEN`` by name (``docker run --env JUPYTER_TOKEN``, the value from the environment
of the ``docker`` CLI), so it is on no command line. Nothing opens a browser; Ctrl-C stops the
server and the container is removed (``--rm``; no TTY, so Jupyter does not ask to confirm).
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import socket
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from envman.run.cidfile import with_cidfile
from envman.errors import BuildError, UserError, shell_join, stderr_line
from envman.images.events import BuildStream
from envman.paths import WORKSPACE
from envman.render.imagepaths import CA_CONTEXT_FILE

if TYPE_CHECKING:
    from envman.engine.api import ContainerEngine
    from envman.matrix.source import MatrixSource
    from envman.render.options import RenderOptions

#: What is installed (pip requirement; JupyterLab 4 needs Python >= 3.8).
JUPYTERLAB = "jupyterlab>=4.2,<5"
CONTAINER_PORT = 8888
TOKEN_ENV = "JUPYTER_TOKEN"
NOTEBOOK_RECIPE = "1"


def notebook_dockerfile(base_image_id: str, network: RenderOptions | None = None) -> str:
    """The notebook layer: JupyterLab into the image's venv, on top of ``base_image_id``
    (:func:`envman.render.layerplan.notebook_plan`), through ``network``'s CA bundle and indexes."""
    from envman.render.layerplan import notebook_plan
    from envman.render.template import render_dockerfile

    return render_dockerfile(notebook_plan(base_image_id, JUPYTERLAB, network))


def notebook_context(base_image_id: str, network: RenderOptions | None = None) -> dict[str, bytes]:
    """The notebook layer's build context (the CA bundle copied in when ``network`` has one). Its
    tag (:func:`notebook_image_ref`) is the hash of the Dockerfile without network settings: they
    say how JupyterLab is fetched, not which."""

    files = {"Dockerfile": notebook_dockerfile(base_image_id, network).encode()}
    ca = network.ca_bytes() if network is not None else None
    if ca is not None:
        files[CA_CONTEXT_FILE] = ca
    return files


def notebook_image_ref(project_name: str, base_image_id: str) -> str:
    h = hashlib.sha256(f"envman-notebook:{NOTEBOOK_RECIPE}\0{notebook_dockerfile(base_image_id)}".encode())
    return f"envman/notebook-{project_name}:{h.hexdigest()[:16]}"


def notebook_command(uid: int, port: int = CONTAINER_PORT) -> tuple[str, ...]:
    """Jupyter's command line (no secret on it: the token comes from ``JUPYTER_TOKEN``). The
    server runs as the invoking user; Jupyter refuses uid 0 unless told that it is meant."""
    return (
        "jupyter", "lab", "--ip=0.0.0.0", f"--port={port}", "--no-browser",
        f"--ServerApp.root_dir={WORKSPACE}", "--ServerApp.allow_remote_access=True",
        *(("--allow-root",) if uid == 0 else ()),
    )


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now on ``host`` (the kernel's choice)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_port(port: int) -> int:
    if not 1024 <= port <= 65535:
        raise UserError(f"port {port} is outside 1024-65535", where="--port", fix="pick another, or leave it out")
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            raise UserError(f"port {port} on 127.0.0.1 is in use", where="--port",
                            fix="pick another, or leave --port out for a free one") from None
    return port


def notebook_url(port: int, token: str) -> str:
    return f"http://127.0.0.1:{port}/lab?token={token}"


#: How long ``envman notebook`` waits for JupyterLab to answer before it says so (seconds).
READY_TIMEOUT = 120.0


def answers_http(port: int, host: str = "127.0.0.1", timeout: float = 2.0) -> bool:
    """Whether an HTTP server answers on ``host:port`` (any status line: it is up). A bare TCP
    connect is not enough: the engine's port proxy accepts before the server inside listens."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(b"GET /api HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            return s.recv(16).startswith(b"HTTP/")
    except OSError:
        return False


def wait_until_ready(port: int, timeout: float, alive, *, pause: float = 0.25) -> str:
    """``"ready"`` once the server on ``port`` answers, ``"exited"`` when ``alive()`` says the
    server's process ended first, ``"timeout"`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if not alive():
            return "exited"
        if answers_http(port):
            return "ready"
        if time.monotonic() >= deadline:
            return "timeout"
        time.sleep(pause)


#: Jupyter's own lines about where it listens: URLs of its port inside the container (which
#: nothing outside reaches) and the page file inside it. envman prints the URL that works instead.
_JUPYTER_URL_LINES = (
    re.compile(rf"https?://[^\s/]*:{CONTAINER_PORT}(?:/|\b)"),
    re.compile(r"file://\S*jpserver-\S*\.html"),
    re.compile(r"To access the server, open this file in a browser:|Or copy and paste one of these URLs:|"
               r"Jupyter Server .* is running at:\s*$"),
)


def shown_line(line: str) -> bool:
    """Whether a line of the notebook server's output is shown: not the lines that point at
    Jupyter's port inside the container (its URLs, its page file), which nothing outside reaches."""
    return not any(p.search(line) for p in _JUPYTER_URL_LINES)


def copy_shown(fd: int, out) -> None:
    """Copy the server's output from ``fd`` to ``out``, line by line, without Jupyter's own URLs."""
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace", newline="") as src:
        for line in src:
            if shown_line(line):
                out.write(line)
                out.flush()


def serve_and_announce(start, port: int, announce, *, timeout: float = READY_TIMEOUT) -> int:  # pragma: no cover - forks
    """Run ``start`` (which execs the server and never returns) in a child, print ``announce``'s
    lines once the server answers on ``port`` (or say it did not within ``timeout``), and return
    the child's exit code. The child runs in a process group of its own (it reads no terminal):
    Ctrl-C, and any INT, TERM or HUP sent to this process, reach it exactly once, forwarded."""
    import signal
    import threading

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            os.close(read_end)
            os.dup2(write_end, 1)
            os.dup2(write_end, 2)
            os.close(write_end)
            start()
        finally:
            os._exit(127)
    os.close(write_end)
    copier = threading.Thread(target=copy_shown, args=(read_end, sys.stderr), daemon=True)
    copier.start()
    forwarded = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def forward(signum, _frame) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    previous = {s: signal.signal(s, forward) for s in forwarded}
    try:
        def alive() -> bool:
            return os.waitpid(pid, os.WNOHANG) == (0, 0)

        state = wait_until_ready(port, timeout, alive)
        if state == "ready":
            sys.stdout.write(announce())
        elif state == "timeout":
            sys.stderr.write(f"envman: warning: JupyterLab did not answer on 127.0.0.1:{port} within "
                             f"{timeout:.0f} s; it may still be starting (its log is above) — Ctrl-C stops it\n")
            sys.stdout.write(announce())
        sys.stdout.flush()
        if state == "exited":
            copier.join(timeout=5)
            return 1
        _, status = os.waitpid(pid, 0)
        copier.join(timeout=5)
        return os.waitstatus_to_exitcode(status)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def build_notebook_image(engine: ContainerEngine, project_name: str, base_image_id: str, *, rebuild: bool = False,
                         network: RenderOptions | None = None) -> str:
    """Build (or reuse) the notebook layer on ``base_image_id``, through ``network``; its image ID
    (what the run names: its tag is anyone's to move). A layer found under its tag is reused only
    when this user built it on that base (:func:`envman.project.image.vouched_image`); a build
    records the image it made."""
    from filelock import FileLock

    from envman.engine.context import deterministic_tar
    from envman.images.provenance import record_built
    from envman.labels import MANAGED, NAME, PROJECT, ROLE, ROLE_PROJECT, TRUE
    from envman.project.image import vouched_image
    from envman.run.command import print_step
    from envman.state import locks_dir

    ref = notebook_image_ref(project_name, base_image_id)
    locks_dir().mkdir(parents=True, exist_ok=True)
    with FileLock(str(locks_dir() / f"notebook-{project_name}.lock"), timeout=3600):
        found = None if rebuild else vouched_image(engine, ref, base_image_id)
        if found is not None:
            return found.id
        stderr_line(f"envman: installing JupyterLab in a layer of its own for {project_name} ({JUPYTERLAB})")
        files = notebook_context(base_image_id, network)
        labels = {MANAGED: TRUE, ROLE: ROLE_PROJECT, PROJECT: project_name, NAME: "notebook"}
        stream = BuildStream(on_event=print_step)
        try:
            stream.read(engine.build(deterministic_tar(files), ref, labels=labels, nocache=rebuild))
        except BuildError as exc:
            raise BuildError(f"the notebook layer of {project_name} failed to build: {exc.what}", log_tail=exc.log_tail,
                             fix="check that pip reaches its index from containers (the failing step and its error lines follow)") from None
        image_id = stream.image_id
        if image_id is None:  # an engine that did not say: the tag, a moment after the build
            info = engine.inspect_image(ref)
            image_id = info.id if info is not None else ref
        record_built(image_id, ref, base=base_image_id)
    return image_id


def notebook_cli(project: str | None, *, port: int | None, stack: str | None, gpus: str | None, no_gpu: bool,
                 rebuild: bool, dry_run: bool, matrix: MatrixSource, ca_bundle: str | None = None) -> None:
    """``envman notebook``: prepare like ``envman run``, add the notebook layer, exec ``docker run``."""
    from envman.engine.docker import Engine
    from envman.engine.facts import docker_facts
    from envman.engine.handoff import exec_docker
    from envman.project.file import Port, check_stack_name, parse_gpus
    from envman.project.registry import locate
    from envman.project.settings import CliOverrides, load_user_config, merge_settings
    from envman.project.trust import project_trusted
    from envman.run.command import build_network, checked_ca_bundle, detect_host, project_image_builder, suggester
    from envman.run.plan import WARNING, docker_argv
    from envman.run.prepare import prepare_run

    if no_gpu and gpus is not None:
        raise UserError("--gpus and --no-gpu contradict each other", where="envman notebook", fix="give one of them")
    if stack is not None:
        check_stack_name(stack, where="--stack", key="--stack")
    ca = checked_ca_bundle(ca_bundle)
    host_port = check_port(port) if port is not None else free_port()
    proj = locate(project)
    cli = CliOverrides(
        stack=stack,
        gpus=None if no_gpu else (parse_gpus(gpus, where="--gpus", key="--gpus") if gpus is not None else None),
        gpus_set=no_gpu or gpus is not None,
        ports=(Port(host_port, CONTAINER_PORT),),
        command=notebook_command(os.getuid()),
    )
    settings = merge_settings(proj, load_user_config(), cli, trusted=project_trusted(proj),
                              stack_is_cpu=lambda s: matrix.resolve(s).is_cpu)
    resolved = matrix.resolve(settings.stack)
    engine = docker_facts()
    prepared = prepare_run(proj, replace(settings, ports=cli.ports), resolved, engine=engine,
                           detect_host=lambda: detect_host(matrix), suggest=suggester(matrix),
                           build_image=project_image_builder(rebuild, ca_bundle=ca), rebuild=rebuild)
    for p in prepared.problems:
        if p.level == WARNING:
            stderr_line(f"envman: warning: {p.message}")
    base = engine.inspect_image(prepared.plan.image)
    if base is None:  # pragma: no cover - prepare_run checked or built it a moment ago
        raise UserError(f"image {prepared.plan.image} disappeared", where="envman notebook", fix="run it again")
    with Engine.connect() as eng:
        image = build_notebook_image(eng, proj.name, base.id, rebuild=rebuild, network=build_network(ca))
    plan = replace(prepared.plan, image=image, tty=False, interactive=False, inherit_env=(TOKEN_ENV,))
    token = secrets.token_hex(32)
    argv = docker_argv(plan)
    if dry_run:
        sys.stdout.write(shell_join(argv) + "\n")
        return
    from envman.run.network import ensure_network

    started = with_cidfile(argv)  # here, not in the server's child: a folder it cannot use is one line
    ensure_network(engine, plan)
    os.environ[TOKEN_ENV] = token  # read by the docker CLI (--env JUPYTER_TOKEN), never on an argv
    stderr_line(f"envman: starting JupyterLab for {proj.name}; the URL follows once it answers")
    sys.exit(serve_and_announce(
        lambda: exec_docker(started), host_port,
        lambda: (f"JupyterLab for {proj.name} on {resolved.name}: {notebook_url(host_port, token)}\n"
                 "(on 127.0.0.1 only: from another machine, ssh -L "
                 f"{host_port}:127.0.0.1:{host_port} this-host; Ctrl-C stops it)\n")))
