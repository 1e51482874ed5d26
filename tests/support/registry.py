"""A real OCI registry for the integration tests: Debian's ``docker-registry`` (distribution v2).

Started with a config written here (never the package's own, which listens on every interface
and enables htpasswd auth): 127.0.0.1 only, no auth, storage in a temporary folder, deletes
enabled. The Docker engine treats 127.0.0.0/8 as an insecure registry by default, so it speaks
plain HTTP to it without any daemon change.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

CONFIG = """version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: {root}
  delete:
    enabled: true
  cache:
    blobdescriptor: inmemory
http:
  addr: 127.0.0.1:{port}
  headers:
    X-Content-Type-Options: [nosniff]
"""
#: Accept header that keeps the registry from converting manifests to schema 1 (another digest).
MANIFEST_ACCEPT = ", ".join([
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
])


class RegistryUnavailable(RuntimeError):
    """The registry binary is missing or the server did not come up (message says why)."""


def registry_binary() -> str | None:
    return shutil.which("docker-registry") or ("/usr/bin/docker-registry" if Path("/usr/bin/docker-registry").exists() else None)


@dataclass
class LocalRegistry:
    host: str  # 127.0.0.1:PORT
    root: Path
    process: subprocess.Popen

    def url(self, path: str) -> str:
        return f"http://{self.host}{path}"

    def manifest_digest(self, repo: str, reference: str) -> str | None:
        req = urllib.request.Request(self.url(f"/v2/{repo}/manifests/{reference}"), method="HEAD")
        req.add_header("Accept", MANIFEST_ACCEPT)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.headers.get("Docker-Content-Digest")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def access_log(self) -> str:
        """The server's log (its access lines name every request: ``"GET /v2/.../manifests/..."``)."""
        try:
            return (self.root / "registry.log").read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)


def start_registry(port: int = 5000, *, timeout: float = 20.0) -> LocalRegistry:
    """Start ``docker-registry serve`` on 127.0.0.1:``port`` and wait until ``GET /v2/`` is 200."""
    binary = registry_binary()
    if binary is None:
        raise RegistryUnavailable("docker-registry is not installed (apt-get install docker-registry)")
    root = Path(tempfile.mkdtemp(prefix="envman-test-registry-"))
    (root / "data").mkdir()
    config = root / "config.yml"
    config.write_text(CONFIG.format(root=root / "data", port=port))
    log = open(root / "registry.log", "wb")
    proc = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    log.close()
    reg = LocalRegistry(f"127.0.0.1:{port}", root, proc)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = (root / "registry.log").read_text(errors="replace")[-800:]
            reg.stop()
            raise RegistryUnavailable(f"docker-registry exited ({proc.returncode}) on 127.0.0.1:{port}: {text}")
        try:
            with urllib.request.urlopen(reg.url("/v2/"), timeout=2) as resp:
                if resp.status == 200:
                    return reg
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    reg.stop()
    raise RegistryUnavailable(f"docker-registry did not answer on 127.0.0.1:{port} within {timeout:.0f} s")
