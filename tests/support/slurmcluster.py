"""A real one-node Slurm cluster for the integration tests, started without systemd.

:func:`start` writes ``slurm.conf`` and ``gres.conf`` (from ``tests/support/slurm/*.in``) into a
scratch folder, makes two fake GPU devices there (character devices aliasing ``/dev/null``, 1:3:
slurmd 22.05 drops a GPU GRES without ``File=``, and ignores ``File=`` entries that are not
devices), starts ``munged`` (unless one already answers), ``slurmctld -D`` and
``slurmd -D -N localhost`` in the foreground as children of this process, and waits until the
node is idle. Clients find the cluster through ``SLURM_CONF``. :meth:`Cluster.stop` terminates
the daemons it started (SIGKILL after a grace period: a slurmd that never registered ignores
SIGTERM), reaps them and removes the scratch folder.

Ports: slurmctld 6817 and slurmd 6818 (Slurm's defaults; 22.05 has no bind-address setting, so
they listen on every interface while the tests run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent / "slurm"
PORTS = (6817, 6818)
PACKAGES = "slurm-wlm munge"


class ClusterError(RuntimeError):
    """The cluster could not be started; the message says why and what to do."""


@dataclass
class Cluster:
    dir: Path
    conf: Path
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 5
        for p in reversed(self.procs):
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        self.procs.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log_tail(self, n: int = 15) -> str:
        out = []
        for name in ("slurmctld.log", "slurmd.log"):
            f = self.dir / "log" / name
            if f.exists():
                out += [f"--- {name}", *f.read_text(errors="replace").splitlines()[-n:]]
        return "\n".join(out)


def missing() -> str | None:
    """Why no cluster can start here, or ``None``."""
    for tool in ("slurmctld", "slurmd", "munged", "sbatch"):
        if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists():
            return f"{tool} not installed (apt-get install {PACKAGES})"
    if os.geteuid() != 0:
        return "a Slurm test cluster needs root (slurmd launches jobs as their users)"
    return None


def _sbin(tool: str) -> str:
    return shutil.which(tool) or f"/usr/sbin/{tool}"


def _port_in_use(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _munge_answers() -> bool:
    try:
        cred = subprocess.run(["munge", "-n"], capture_output=True, timeout=5, stdin=subprocess.DEVNULL)
        if cred.returncode != 0:
            return False
        return subprocess.run(["unmunge"], input=cred.stdout, capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _start_munge(cluster: Cluster) -> None:
    if _munge_answers():
        return
    key = Path("/etc/munge/munge.key")
    if not key.exists():
        key.write_bytes(os.urandom(1024))
        shutil.chown(key, "munge", "munge")
        key.chmod(0o400)
    for d, mode in (("/run/munge", 0o755), ("/var/log/munge", 0o700), ("/var/lib/munge", 0o700)):
        Path(d).mkdir(parents=True, exist_ok=True)
        Path(d).chmod(mode)
        shutil.chown(d, "munge", "munge")
    # setpriv execs munged, so the child's pid is munged's and it stays ours to stop.
    cluster.procs.append(subprocess.Popen(
        ["setpriv", "--reuid=munge", "--regid=munge", "--init-groups", _sbin("munged"), "-F"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    _wait(_munge_answers, 10, "munged did not answer", cluster)


def _wait(ready, seconds: float, what: str, cluster: Cluster) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        dead = [p.args for p in cluster.procs if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            raise ClusterError(f"{what} ({'exited: ' + str(dead[0]) if dead else 'timed out'})\n{cluster.log_tail()}")
        time.sleep(0.1)


def _ok(argv: list[str], env: dict[str, str], expect: str) -> bool:
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=10)
    return p.returncode == 0 and expect in p.stdout


def start() -> Cluster:
    """Start the cluster (see the module docstring); raises :class:`ClusterError`."""
    why = missing()
    if why:
        raise ClusterError(why)
    busy = [p for p in PORTS if _port_in_use(p)]
    if busy:
        raise ClusterError(f"port {busy[0]} is in use: another Slurm runs here; stop it first")
    d = Path(tempfile.mkdtemp(prefix="envman-slurm-"))
    d.chmod(0o755)
    cluster = Cluster(d, d / "slurm.conf")
    try:
        for sub in ("spool/slurmctld", "spool/slurmd", "log", "dev"):
            (d / sub).mkdir(parents=True)
        for i in range(2):
            os.mknod(d / "dev" / f"fakegpu{i}", 0o666 | 0o020000, os.makedev(1, 3))
        cpus = str(min(os.cpu_count() or 1, 4))  # fewer than the machine has is always a valid node
        for name in ("slurm.conf", "gres.conf"):
            text = (HERE / f"{name}.in").read_text().replace("@DIR@", str(d)).replace("@CPUS@", cpus)
            (d / name).write_text(text)
        _start_munge(cluster)
        env = cluster.env
        log = open(d / "log" / "daemons.out", "ab")
        cluster.procs.append(subprocess.Popen([_sbin("slurmctld"), "-D", "-i"], env=env, stdout=log, stderr=log))
        _wait(lambda: _ok(["scontrol", "ping"], env, "is UP"), 30, "slurmctld did not come up", cluster)
        cluster.procs.append(subprocess.Popen([_sbin("slurmd"), "-D", "-N", "localhost"], env=env, stdout=log, stderr=log))
        _wait(lambda: any(s in _state(env) for s in ("idle", "mixed", "allocated")), 30, "the node did not become idle",
              cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _state(env: dict[str, str]) -> str:
    p = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True, env=env, timeout=10)
    return p.stdout.strip()
