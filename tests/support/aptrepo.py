"""A local NVIDIA-style apt repository for tests: a flat repository (``deb URL /``) of dummy
packages named and versioned as a recipe names them, indexed by ``apt-ftparchive``, its Release
file signed with a throw-away OpenPGP key, served on 127.0.0.1 with the public key beside it
(as ``3bf863cc.pub``, the file name NVIDIA's repositories use). Nothing of NVIDIA's is used."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.index_server import IndexServer


def _run(argv: list[str], **kw) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw).stdout


def dummy_deb(out: Path, name: str, version: str, files: dict[str, str] | None = None) -> Path:
    """A .deb named ``name`` at ``version`` (Architecture: all) holding ``files`` (path -> text)."""
    root = Path(tempfile.mkdtemp(prefix="deb-"))
    try:
        (root / "DEBIAN").mkdir()
        (root / "DEBIAN" / "control").write_text(
            f"Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: envman tests <t@example.invalid>\n"
            f"Description: stand-in for {name} (envman tests)\n")
        for path, text in (files or {f"usr/share/doc/{name}/envman-standin": f"{name} {version}\n"}).items():
            p = root / path
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        deb = out / f"{name}_{version.replace(':', '%3a')}_all.deb"
        _run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)])
        return deb
    finally:
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class AptRepo:
    """The served repository: ``url`` (``deb URL /``), ``key_url``, ``fingerprint``, and
    ``downloads`` (file name -> (URL, sha256)) for packages fetched directly."""

    server: IndexServer
    fingerprint: str
    downloads: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"{self.server.url}/repo"

    @property
    def key_url(self) -> str:
        return f"{self.url}/3bf863cc.pub"

    def tamper(self, file: str) -> None:
        """Serve other bytes for ``file`` than the signed index says (a tampered package)."""
        body, ctype = self.server.files[f"/repo/{file}"]
        self.server.files[f"/repo/{file}"] = (body + b"tampered", ctype)

    def close(self) -> None:
        self.server.__exit__(None, None, None)


def make_repo(packages: dict[str, str], direct: dict[str, str] | None = None) -> AptRepo:
    """Build, sign and serve a repository of ``packages`` (name -> version); ``direct`` (name ->
    version) are served beside it as plain files, not in the index (a recipe's downloads)."""
    work = Path(tempfile.mkdtemp(prefix="envman-aptrepo-"))
    try:
        repo = work / "repo"
        repo.mkdir()
        for name, version in packages.items():
            dummy_deb(repo, name, version)
        gnupg = work / "gnupg"
        gnupg.mkdir(mode=0o700)
        gpg = ["gpg", "--homedir", str(gnupg), "--batch", "--pinentry-mode", "loopback", "--passphrase", ""]
        _run([*gpg, "--quick-gen-key", "envman test repository <t@example.invalid>", "rsa2048", "sign", "never"])
        fpr = next(line.split(":")[9] for line in _run([*gpg, "--with-colons", "--fingerprint"]).splitlines()
                   if line.startswith("fpr:"))
        pub = _run([*gpg, "--armor", "--export", fpr])
        index = _run(["apt-ftparchive", "packages", "."], cwd=repo)
        (repo / "Packages").write_text(index.replace("Filename: ./", "Filename: "))
        release = _run(["apt-ftparchive", "release", "."], cwd=repo)
        (repo / "Release").write_text(release)
        _run([*gpg, "--clearsign", "-o", str(repo / "InRelease"), str(repo / "Release")])
        _run([*gpg, "--armor", "--detach-sign", "-o", str(repo / "Release.gpg"), str(repo / "Release")])
        server = IndexServer()
        for f in sorted(repo.iterdir()):
            server.add(f"/repo/{f.name}", f.read_bytes())
        server.add("/repo/3bf863cc.pub", pub.encode())
        out = AptRepo(server=server, fingerprint=fpr.upper())
        extra = work / "direct"
        extra.mkdir()
        for name, version in (direct or {}).items():
            deb = dummy_deb(extra, name, version)
            data = deb.read_bytes()
            server.add(f"/repo/{deb.name}", data)
            out.downloads[deb.name] = (f"{out.url}/{deb.name}", hashlib.sha256(data).hexdigest())
        server.__enter__()
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


__all__ = ["AptRepo", "dummy_deb", "make_repo"]
