"""Both builders on the real engine, on a stand-in base and a small stack (one tiny pinned package
from a wheelhouse, its neighbours from the index):

* the classic and the BuildKit image hold the same Python packages and the same labels;
* no layer of the BuildKit image holds a wheel, the CA bundle envman was given, an index
  credential, or anything of the caches (``docker save``, every layer's tar read) — and the same
  scan finds the wheel and the CA in the classic image, so it can fail;
* a rebuild after a pin change, with the build's network switched off, succeeds from the cache
  mounts alone (apt's, pip's, uv's and the uv binary's).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import pytest

from envman.images.build import build_stack
from envman.engine.builder import BuildKitBuilder, ClassicBuilder, find_buildkit_cli, select_builder
from envman.matrix.load import load_matrix
from envman.render.options import RenderOptions
from envman.stack.resolve import resolve

from ..conftest import in_ci
from .conftest import host_ca_bundle
from tests.support.rows import cpu_torch_matrix

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.pypi]

PACKAGES = ('"six==1.17.0"', '"requests==2.32.3"')
#: A version no other test builds: the docker tests of whole stacks remove every test image of
#: their stack names when they start and end, and may run at the same time as these.
VERSION = "13.0.13"
STACK = f"torch-{VERSION}-cpu"
#: Debian's python3-venv ships ensurepip's wheels here (package python3-pip-whl): OS files that
#: `python -m venv` needs, in every image with a distribution Python, whatever the builder.
DISTRO_WHEELS = "usr/share/python-wheels/"


def write_matrix(path: Path, *packages: str) -> Path:
    path.write_text(cpu_torch_matrix(VERSION, "test fixture: a small stack for the builder tests", ", ".join(packages)))
    return path


def pip_index_url() -> str:
    """The index pip uses by default, read from pip itself (no host name written here)."""
    from pip._internal.models.index import PyPI

    return PyPI.simple_url


@pytest.fixture(scope="module")
def env(tmp_path_factory, docker_engine, standin):
    """State dir, wheelhouse (the six wheel), a CA bundle with a unique extra certificate, an index
    URL with a unique credential, and the stack; images built here are removed at the end."""
    if find_buildkit_cli() is None:
        msg = "no docker CLI here builds with BuildKit (buildx plugin, or a CLI before 23.0)"
        if in_ci():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    tmp = tmp_path_factory.mktemp("buildkit")
    wheels = tmp / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "download", "six==1.17.0", "--no-deps", "-d", str(wheels), "-q"], check=True)
    key, cert = tmp / "extra.key", tmp / "extra.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                    f"/CN=envman-test-{uuid.uuid4().hex[:8]}", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    bundle = tmp / "bundle.pem"
    bundle.write_bytes(Path(host_ca_bundle()).read_bytes() + cert.read_bytes())
    marker = cert.read_text().splitlines()[3].encode()  # a line of base64 only this certificate has
    token = "tok" + uuid.uuid4().hex
    user, scheme_rest = "envman-test", pip_index_url().split("://", 1)
    index = f"{scheme_rest[0]}://{user}:{token}@{scheme_rest[1]}"
    matrix = write_matrix(tmp / "m.toml", *PACKAGES)
    stack = resolve(load_matrix([matrix]), STACK)
    standin(stack.base_image)
    built: list[str] = []
    state = tmp / "state"
    mp = pytest.MonkeyPatch()
    mp.setenv("ENVMAN_STATE_DIR", str(state))
    yield {"tmp": tmp, "wheels": wheels, "bundle": bundle, "marker": marker, "token": token.encode(),
           "index": index, "stack": stack, "built": built}
    mp.undo()
    for ref in built:
        docker_engine.remove_image(ref, force=True)


def build(engine, env, builder, stack=None, **kw):
    options = RenderOptions(wheelhouse=env["wheels"], ca_bundle=env["bundle"],
                            **({"pip_index": env["index"]} if builder.kind == "buildkit" else {}))
    res = build_stack(engine, stack or env["stack"], options, builder=builder, **kw)
    env["built"].append(res.ref)
    return res


def pip_freeze(engine, ref: str) -> set[str]:
    res = engine.run(ref, ["python", "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
                     network="none", timeout=120)
    assert res.ok, res.stderr
    return {line.strip().lower() for line in res.stdout.splitlines() if "==" in line}


def layer_files(ref: str) -> list[tuple[str, bytes]]:
    """(path, content) of every regular file in every layer of ``ref`` (``docker save``)."""
    saved = subprocess.run(["docker", "save", ref], check=True, capture_output=True).stdout
    out = []
    with tarfile.open(fileobj=io.BytesIO(saved)) as image:
        manifest = json.loads(image.extractfile("manifest.json").read())  # type: ignore[union-attr]
        for layer in manifest[0]["Layers"]:
            with tarfile.open(fileobj=image.extractfile(layer)) as lt:  # type: ignore[arg-type]
                for member in lt:
                    if member.isfile():
                        out.append((member.name, lt.extractfile(member).read()))  # type: ignore[union-attr]
    return out


def leaks(files: list[tuple[str, bytes]], env) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {"wheel": [], "ca": [], "secret": [], "cache": []}
    for name, data in files:
        if name.endswith(".whl") and not name.startswith(DISTRO_WHEELS):
            found["wheel"].append(name)
        if env["marker"] in data:
            found["ca"].append(name)
        if env["token"] in data:
            found["secret"].append(name)
        if name.startswith(("var/cache/envman/", "root/.cache/", "tmp/envman")) and data:
            found["cache"].append(name)
    return found


@pytest.fixture(scope="module")
def both(env, docker_engine):
    bk = build(docker_engine, env, select_builder(docker_engine, "buildkit"))
    classic = build(docker_engine, env, ClassicBuilder(docker_engine))
    return bk, classic


def test_both_builders_give_the_same_packages_and_labels(both, docker_engine):
    bk, classic = both
    assert bk.render_hash != classic.render_hash and not bk.cached and not classic.cached
    assert pip_freeze(docker_engine, bk.ref) == pip_freeze(docker_engine, classic.ref)
    assert {"six==1.17.0", "requests==2.32.3"} <= pip_freeze(docker_engine, bk.ref)
    labels = {r.ref: docker_engine.inspect_image(r.ref).labels for r in both}
    for r in both:  # the same content-addressed scheme: the tag's hash is the label's
        assert labels[r.ref]["envman.render-hash"] == r.render_hash and r.ref.endswith(":" + r.render_hash[:16])
    strip = [{k: v for k, v in lab.items() if k != "envman.render-hash"} for lab in labels.values()]
    assert strip[0] == strip[1] and strip[0]["envman.role"] == "candidate"


def test_no_wheel_ca_secret_or_cache_in_any_buildkit_layer(both, env, docker_engine):
    bk, classic = both
    found = leaks(layer_files(bk.ref), env)
    assert found == {"wheel": [], "ca": [], "secret": [], "cache": []}, found
    config = subprocess.run(["docker", "image", "inspect", bk.ref], check=True, capture_output=True).stdout  # all of it
    history = subprocess.run(["docker", "history", "--no-trunc", bk.ref], check=True, capture_output=True).stdout
    assert env["token"] not in config and env["token"] not in history
    log = Path(bk.log_path).read_bytes()  # type: ignore[arg-type]
    assert env["token"] not in log and b"envman-test:" not in log
    # the scan is not blind: the classic image carries the wheel and the CA in its layers
    classic_found = leaks(layer_files(classic.ref), env)
    assert classic_found["wheel"] and classic_found["ca"]


def test_a_rebuild_after_a_pin_change_succeeds_from_the_caches_with_no_network(both, env, docker_engine):
    bk, _ = both
    idna = next(p for p in pip_freeze(docker_engine, bk.ref) if p.startswith("idna=="))
    matrix = write_matrix(env["tmp"] / "pin.toml", '"six==1.17.0"', f'"{idna}"')
    stack = resolve(load_matrix([matrix]), STACK)
    chosen = select_builder(docker_engine, "buildkit")
    assert isinstance(chosen, BuildKitBuilder)
    offline = BuildKitBuilder(chosen.cli, chosen.host, network="none")
    again = build(docker_engine, env, offline, stack=stack)
    assert not again.cached and again.render_hash != bk.render_hash
    packages = pip_freeze(docker_engine, again.ref)
    assert idna in packages and "six==1.17.0" in packages and not any(p.startswith("requests==") for p in packages)
    log = Path(again.log_path).read_text().splitlines()  # type: ignore[arg-type]
    assert not [ln for ln in log if ln.startswith("envman: not everything is in uv's cache")]  # the cache sufficed
