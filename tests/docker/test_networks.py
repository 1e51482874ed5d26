"""Networks on the real engine: a project's containers reach each other (by name too), another
project's containers cannot reach them, and ``network = "none"`` gives a container no network.

The stacks, matrix and state are the fixtures of ``test_projects`` (stand-in stack images on
stand-in bases); the runs, networks and connections are real.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request

import pytest

from tests.docker.test_projects import envman, matrix_files, stacks, workdir  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

STACK = "torch-0.0.2-cuda12.8"
#: Fetch a URL from inside a container: prints the HTTP status, or "unreachable".
FETCH = ("import sys, urllib.request\n"
         "try:\n"
         "    print(urllib.request.urlopen(sys.argv[1], timeout=3).status)\n"
         "except OSError:\n"
         "    print('unreachable')\n")


def _project(workdir, name: str, extra: str = ""):
    root = workdir / f"project-{name}"
    root.mkdir(exist_ok=True)
    (root / "envman.toml").write_text(f'stack = "{STACK}"\nname = "{name}"\ngpus = "none"\n{extra}')
    return root


def _inspect(container: str) -> dict:
    out = subprocess.run(["docker", "inspect", container], capture_output=True, text=True, check=True).stdout
    return json.loads(out)[0]


def test_projects_are_apart_and_a_project_s_runs_are_together(docker_engine, stacks, matrix_files, workdir):  # noqa: F811
    _ids, states = stacks
    state, config = states["root"], workdir / "config-networks"
    a = _project(workdir, "envman-test-net-a")
    b = _project(workdir, "envman-test-net-b")
    c = _project(workdir, "envman-test-net-c", 'network = "none"\n')
    (a / "index.html").write_text("project a\n")
    for root in (a, c):
        assert envman(matrix_files, config, state, "project", "add", str(root), cwd=workdir).returncode == 0
    me = os.getuid()
    server = "envman-test-net-a-srv"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        r = envman(matrix_files, config, state, "run", "--detach", "--name", server, "-p", f"{port}:8000", str(a), "--",
                   "python", "-m", "http.server", "8000", "--bind", "0.0.0.0", cwd=workdir)
        assert r.returncode == 0, r.stderr
        doc = _inspect(server)
        (net_name,) = doc["NetworkSettings"]["Networks"]
        assert net_name.startswith(f"envman-{me}-envman-test-net-a-") and doc["HostConfig"]["NetworkMode"] == net_name
        ip = doc["NetworkSettings"]["Networks"][net_name]["IPAddress"]
        labels = json.loads(subprocess.run(["docker", "network", "inspect", "-f", "{{json .Labels}}", net_name],
                                           capture_output=True, text=True, check=True).stdout)
        assert labels["envman.role"] == "network" and labels["envman.uid"] == str(me)

        def fetch(root, url):
            r = envman(matrix_files, config, state, "run", str(root), "--", "python", "-c", FETCH, url, cwd=workdir)
            assert r.returncode == 0, r.stderr
            return r.stdout.strip()

        deadline, got = time.monotonic() + 60, None
        while got != "200" and time.monotonic() < deadline:  # the server is up: project a's runs reach it
            got = fetch(a, f"http://{ip}:8000/index.html")
        assert got == "200"
        # its published port still serves the host, on 127.0.0.1
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html", timeout=5).read() == b"project a\n"
        assert fetch(a, f"http://{server}:8000/index.html") == "200"  # and by the container's name
        # Another project (no trust needed: it asks for nothing) reaches neither its address nor its name.
        assert fetch(b, f"http://{ip}:8000/index.html") == "unreachable"
        assert fetch(b, f"http://{server}:8000/index.html") == "unreachable"
        # network = "none": a loopback interface only.
        r = envman(matrix_files, config, state, "run", str(c), "--", "ls", "/sys/class/net", cwd=workdir)
        assert r.returncode == 0 and r.stdout.split() == ["lo"], (r.stdout, r.stderr)
        r = envman(matrix_files, config, state, "run", "--network", "none", str(a), "--", "ls", "/sys/class/net",
                   cwd=workdir)
        assert r.returncode == 0 and r.stdout.split() == ["lo"], (r.stdout, r.stderr)
    finally:
        subprocess.run(["docker", "rm", "-f", server], capture_output=True)
        nets = subprocess.run(["docker", "network", "ls", "-q", "--filter", "label=envman.role=network",
                               "--filter", f"label=envman.uid={me}", "--filter", "name=envman-test-net-"],
                              capture_output=True, text=True).stdout.split()
        for n in nets:
            subprocess.run(["docker", "network", "rm", n], capture_output=True)
