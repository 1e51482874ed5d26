"""The wheel store (envman.images.wheelstore): pins, the image's tags, the choice of file, filling
from an index (hash-checked), serving, and when a classic build gets it. No engine: the index is
a local HTTP server, the engine a fake (tests/docker/test_wheel_store.py builds for real)."""

from __future__ import annotations

import dataclasses
import hashlib
import urllib.request
from pathlib import Path

import pytest

from envman.engine.api import NetworkInfo
from envman.engine.builder import BuildKitBuilder, BuildKitCli, ClassicBuilder
from envman.images import wheelstore as ws
from envman.matrix.index import Http, IndexFile
from envman.render.options import RenderOptions
from tests.support.fake_engine import FakeEngine
from tests.support.index_server import IndexServer

A = hashlib.sha256(b"wheel a").hexdigest()
B = hashlib.sha256(b"wheel b").hexdigest()


def _file(name: str, sha: str, *, yanked: bool = False) -> IndexFile:
    return IndexFile(filename=name, url=f"http://index.invalid/{name}", hashes=(("sha256", sha),), yanked=yanked)


# --- pins and tags ---------------------------------------------------------------------------------


def test_a_pin_is_read_with_every_hash_and_refused_without_one():
    pin = ws.parse_pin(f"nvidia-nvtx-cu12==12.4.127 --hash=sha256:{A} --hash=sha256:{B}")
    assert pin == ws.Pin("nvidia-nvtx-cu12", "12.4.127", (A, B)) and str(pin) == "nvidia-nvtx-cu12==12.4.127"
    assert ws.parse_pin("nvidia-nvtx-cu12==12.4.127") is None  # nothing to check a stored wheel against
    assert ws.parse_pin(f"nvidia-nvtx-cu12>=12 --hash=sha256:{A}") is None
    assert ws.parse_pin(f"nvidia-nvtx-cu12==12.4.127 --hash=sha256:{A[:-1]}") is None
    assert ws.parse_pin(f"x==1 --hash=sha256:{A}; rm -rf /") is None


def test_the_image_accepts_manylinux_up_to_its_glibc_and_not_one_past_it():
    tags = {str(t) for t in ws.supported_tags("3.10", "linux/amd64", "ubuntu22.04")}  # glibc 2.35
    assert "cp310-cp310-manylinux_2_35_x86_64" in tags and "cp310-cp310-manylinux_2_36_x86_64" not in tags
    assert {"py3-none-manylinux2014_x86_64", "py3-none-manylinux1_x86_64", "py3-none-linux_x86_64"} <= tags
    assert not any("cp311" in t for t in tags)
    best = ws.supported_tags("3.10", "linux/amd64", "ubuntu22.04")[0]
    assert str(best) == "cp310-cp310-manylinux_2_35_x86_64"
    # an OS the table lacks: manylinux2014's floor
    other = {str(t) for t in ws.supported_tags("3.11", "linux/amd64", "plan9")}
    assert "py3-none-manylinux_2_17_x86_64" in other and "py3-none-manylinux_2_18_x86_64" not in other
    arm = {str(t) for t in ws.supported_tags("3.12", "linux/arm64", "ubuntu24.04")}
    assert "py3-none-manylinux2014_aarch64" in arm and "py3-none-manylinux1_aarch64" not in arm
    free = {str(t) for t in ws.supported_tags("3.13t", "linux/amd64", "ubuntu24.04")}
    assert "cp313-cp313t-manylinux_2_39_x86_64" in free and "cp313-cp313-manylinux_2_39_x86_64" not in free


def test_the_file_chosen_is_the_pinned_one_with_the_best_tag():
    pin = ws.Pin("nvidia-nvtx-cu12", "12.4.127", (A, B))
    tags = ws.supported_tags("3.10", "linux/amd64", "ubuntu22.04")
    old = _file("nvidia_nvtx_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl", A)
    new = _file("nvidia_nvtx_cu12-12.4.127-py3-none-manylinux_2_28_x86_64.whl", B)
    files = [
        _file("nvidia_nvtx_cu12-12.4.127-py3-none-manylinux_2_36_x86_64.whl", A),  # past the image's glibc
        _file("nvidia_nvtx_cu12-12.4.127-py3-none-manylinux_2_34_x86_64.whl", "0" * 64),  # hash not pinned
        _file("nvidia_nvtx_cu12-12.4.127-py3-none-manylinux_2_34_aarch64.whl", B),  # another machine
        _file("nvidia_nvtx_cu12-12.4.128-py3-none-manylinux_2_34_x86_64.whl", B),  # another version
        _file("nvidia_nvtx_cu12-12.4.127-py3-none-manylinux_2_33_x86_64.whl", A, yanked=True),
        _file("nvidia_nvtx_cu12-12.4.127.tar.gz", A),
        old, new,
    ]
    assert ws.choose(files, pin, tags) == new
    assert ws.choose([old], pin, tags) == old
    assert ws.choose(files[:6], pin, tags) is None


# --- filling from an index ---------------------------------------------------------------------------


WHEEL = "nvidia_nvtx_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl"
BODY = b"PK the wheel's bytes"
SHA = hashlib.sha256(BODY).hexdigest()
PIN = ws.Pin("nvidia-nvtx-cu12", "12.4.127", (SHA,))
TAGS = ws.supported_tags("3.11", "linux/amd64", "ubuntu22.04")


def _index(srv: IndexServer, body: bytes = BODY, sha: str = SHA) -> ws.Sources:
    srv.add("/simple/nvidia-nvtx-cu12/", f'<a href="/f/{WHEEL}#sha256={sha}">{WHEEL}</a>', "text/html")
    srv.add(f"/f/{WHEEL}", body)
    return ws.Sources((srv.url + "/simple",))


def _downloads(srv: IndexServer) -> int:
    return sum(1 for path, _ in srv.requests if path.startswith("/f/"))


def test_a_pin_is_downloaded_once_then_served_from_the_store(tmp_path):
    store = ws.WheelStore(tmp_path / "store")
    with IndexServer() as srv:
        sources = _index(srv)
        first = ws.fill(store, [PIN], sources, TAGS, Http(retries=0))
        again = ws.fill(store, [PIN], sources, TAGS, Http(retries=0))
        assert _downloads(srv) == 1
    assert first.wheels == again.wheels and not first.missing
    assert first.wheels[0].path == tmp_path / "store" / "sha256" / SHA / WHEEL and first.wheels[0].path.read_bytes() == BODY
    assert (tmp_path / "store").stat().st_mode & 0o777 == 0o700 and store.fetched == [f"{WHEEL} ({len(BODY)} bytes)"]


def test_a_download_whose_hash_is_not_pinned_is_not_kept(tmp_path):
    store = ws.WheelStore(tmp_path / "store")
    with IndexServer() as srv:
        # the page names the pinned hash, the file has other bytes (a broken mirror)
        filled = ws.fill(store, [PIN], _index(srv, body=b"other bytes"), TAGS, Http(retries=0))
    assert not filled.wheels and "not one the matrix row pins" in filled.missing[0]
    assert list((tmp_path / "store" / "sha256").rglob("*")) == []  # no partial file, no folder


def test_a_stored_wheel_whose_bytes_changed_is_removed_and_fetched_again(tmp_path):
    store = ws.WheelStore(tmp_path / "store")
    planted = tmp_path / "store" / "sha256" / SHA / WHEEL
    planted.parent.mkdir(parents=True)
    planted.write_bytes(b"planted")
    with IndexServer() as srv:
        filled = ws.fill(store, [PIN], _index(srv), TAGS, Http(retries=0))
        assert _downloads(srv) == 1
    assert planted.read_bytes() == BODY and filled.wheels[0].path == planted


def test_a_pin_no_index_has_is_reported_not_raised(tmp_path):
    with IndexServer() as srv:  # no pages at all: 404
        filled = ws.fill(ws.WheelStore(tmp_path / "s"), [PIN], ws.Sources((srv.url + "/simple",)), TAGS, Http(retries=0))
    assert not filled.wheels and filled.missing[0].startswith("nvidia-nvtx-cu12==12.4.127: ")


def test_the_sources_are_the_steps_indexes_without_credentials(monkeypatch):
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve
    from tests.docker.conftest import STANDIN_MATRIX

    stack = resolve(load_matrix([STANDIN_MATRIX]), "torch-2.13.0-cpu")
    assert ws.sources_of(stack, RenderOptions()) == ws.Sources(("https://pypi.org/simple",))
    s = dataclasses.replace(stack, index_url="https://download.example/whl/cu124", find_links="https://links.example/")
    opts = RenderOptions(pip_extra_index="https://user:secret@private.example/simple")
    got = ws.sources_of(s, opts)
    assert got == ws.Sources(("https://download.example/whl/cu124",), ("https://links.example/",))
    assert "secret" not in repr(got)


# --- serving ------------------------------------------------------------------------------------------


def test_the_server_lists_the_builds_wheels_with_their_hashes_and_serves_nothing_else(tmp_path):
    f = tmp_path / WHEEL
    f.write_bytes(BODY)
    secret = tmp_path / "secret.txt"
    secret.write_text("not a wheel")
    with ws.serve("127.0.0.1", [ws.StoredWheel(WHEEL, SHA, f)], port=0) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        page = urllib.request.urlopen(url + "/").read().decode()
        assert f'href="{WHEEL}#sha256={SHA}"' in page
        assert urllib.request.urlopen(f"{url}/{WHEEL}").read() == BODY
        for path in ("/secret.txt", "/../secret.txt", "/%2e%2e/secret.txt", f"/{WHEEL}/x"):
            with pytest.raises(urllib.error.HTTPError) as exc:
                urllib.request.urlopen(url + path)
            assert exc.value.code == 404
    assert server.served == [WHEEL]


# --- which builds get it ---------------------------------------------------------------------------


@pytest.fixture
def stack():
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve
    from tests.docker.conftest import STANDIN_MATRIX

    s = resolve(load_matrix([STANDIN_MATRIX]), "torch-2.13.0-cpu")
    return dataclasses.replace(s, cuda_libs=(f"nvidia-nvtx-cu12==12.4.127 --hash=sha256:{SHA}",))


def test_only_envmans_classic_builds_of_hashed_pins_get_the_store(stack, monkeypatch):
    monkeypatch.delenv("ENVMAN_WHEEL_STORE", raising=False)
    classic = ClassicBuilder(FakeEngine())  # type: ignore[arg-type]
    assert ws.wanted(stack, RenderOptions(), classic) == [PIN]
    assert ws.wanted(stack, RenderOptions(offline=True, wheelhouse=Path("/")), classic) == []
    assert ws.wanted(stack, RenderOptions(), ClassicBuilder(FakeEngine(), network="host")) == []  # type: ignore[arg-type]
    assert ws.wanted(stack, RenderOptions(), BuildKitBuilder(BuildKitCli("docker", True), None)) == []
    assert ws.wanted(dataclasses.replace(stack, cuda_libs=("nvidia-nvtx-cu12==12.4.127",)), RenderOptions(), classic) == []
    assert ws.wanted(dataclasses.replace(stack, cuda_libs=()), RenderOptions(), classic) == []
    monkeypatch.setenv("ENVMAN_WHEEL_STORE", "0")
    assert ws.wanted(stack, RenderOptions(), classic) == []


class _Facts:
    """The network calls ``served`` makes, on a fake engine."""

    def __init__(self, gateway: str = "127.0.0.1", fail: bool = False) -> None:
        self.gateway, self.fail = gateway, fail
        self.networks: dict[str, dict[str, str]] = {}
        self.removed: list[str] = []

    def create_network(self, name, labels):
        from envman.errors import EngineError

        if self.fail:
            raise EngineError("docker network create: could not find an available, non-overlapping IPv4 address pool")
        self.networks[name] = labels
        return "id-" + name

    def inspect_network(self, name):
        return NetworkInfo(id="id", name=name, driver="bridge", labels=self.networks[name], gateway=self.gateway)

    def remove_network(self, name):
        self.removed.append(name)
        self.networks.pop(name, None)
        return True

    def list_networks(self, labels):
        return [NetworkInfo(id="id", name=n, driver="bridge", labels=v) for n, v in self.networks.items()]


def test_a_classic_build_runs_on_its_own_network_with_the_store_served_then_both_go(stack, tmp_path, monkeypatch):
    monkeypatch.setattr(ws, "WHEEL_STORE_PORT", 0)
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    facts = _Facts()
    monkeypatch.setattr(ws, "_local_facts", lambda run: facts)
    engine = FakeEngine()
    with IndexServer() as srv:
        src = _index(srv)
        monkeypatch.setattr(ws, "sources_of", lambda s, o: src)
        with ws.served(ClassicBuilder(engine), stack, RenderOptions(),  # type: ignore[arg-type]
                       store=ws.WheelStore(tmp_path / "store"), http=Http(retries=0)) as (run, info):
            assert isinstance(run, ClassicBuilder) and run.network in facts.networks
            assert run.hosts == (("envman-wheels", "127.0.0.1"),)
            assert facts.networks[run.network] == {"envman.managed": "true", "envman.role": "build-network",
                                                   "envman.uid": str(__import__("os").getuid())}
            assert info.server is not None and [w.filename for w in info.wheels] == [WHEEL]
            list(run.build(b"", "t:1", labels={}))
            name = run.network
    assert engine.build_calls[0]["network"] == name and engine.build_calls[0]["extra_hosts"] == {"envman-wheels": "127.0.0.1"}
    assert facts.removed == [name] and not facts.networks
    assert not list((tmp_path / "state" / "locks").glob("envman-build-*"))


def test_without_a_network_the_build_goes_to_the_index_with_a_note(stack, tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    facts = _Facts(fail=True)
    monkeypatch.setattr(ws, "_local_facts", lambda run: facts)
    builder = ClassicBuilder(FakeEngine())  # type: ignore[arg-type]
    with IndexServer() as srv:
        src = _index(srv)
        monkeypatch.setattr(ws, "sources_of", lambda s, o: src)
        with ws.served(builder, stack, RenderOptions(), store=ws.WheelStore(tmp_path / "store"),
                       http=Http(retries=0)) as (run, info):
            assert run is builder
    assert info.notes and "address pool" in info.notes[0] and "index" in info.notes[0]


def test_a_remote_engine_gets_no_store(stack):
    class Remote(FakeEngine):
        url = "tcp://build-host.example:2376"

    assert ws._local_facts(ClassicBuilder(Remote())) is None  # type: ignore[arg-type]
    with ws.served(ClassicBuilder(Remote()), stack, RenderOptions()) as (run, info):  # type: ignore[arg-type]
        assert run.network is None and info.server is None


def test_a_leftover_build_network_of_a_dead_build_is_removed_and_a_live_ones_kept(tmp_path, monkeypatch):
    from filelock import FileLock

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    import os

    uid = os.getuid()
    facts = _Facts()
    labels = ws._build_network_labels(uid)
    facts.networks = {f"envman-build-{uid}-dead": labels, f"envman-build-{uid}-live": labels,
                      f"envman-build-{uid + 1}-other": ws._build_network_labels(uid + 1)}
    (tmp_path / "state" / "locks").mkdir(parents=True)
    live = FileLock(str(tmp_path / "state" / "locks" / f"envman-build-{uid}-live.lock"))
    live.acquire()
    try:
        ws._remove_leftovers(facts, uid)  # type: ignore[arg-type]
    finally:
        live.release()
    assert facts.removed == [f"envman-build-{uid}-dead"]


# --- the rendered step -------------------------------------------------------------------------------


def test_the_classic_step_tries_the_store_first_and_buildkit_and_offline_never(stack):
    from envman.render.dockerfile import render_stack

    classic = render_stack(stack, RenderOptions(), builder="classic").dockerfile
    assert ("--no-index --retries 0 --timeout 10 --find-links http://envman-wheels:47263/ --trusted-host envman-wheels"
            " -r /tmp/envman-cuda-libs.txt \\\n    || { /opt/venv/bin/python -m pip install") in classic
    assert "envman-wheels" not in render_stack(stack, RenderOptions(), builder="buildkit").dockerfile
    unhashed = dataclasses.replace(stack, cuda_libs=("nvidia-nvtx-cu12==12.4.127",))
    assert "envman-wheels" not in render_stack(unhashed, RenderOptions(), builder="classic").dockerfile


def test_the_server_listens_on_the_port_the_step_asks():
    from envman.engine import wheelserver
    from envman.render.imagepaths import WHEEL_STORE_PORT, WHEEL_STORE_URL

    assert wheelserver.WHEEL_STORE_PORT == WHEEL_STORE_PORT and WHEEL_STORE_URL.endswith(f":{WHEEL_STORE_PORT}/")


def test_a_networks_gateway_is_read_from_its_ipam_config():
    doc = {"Id": "x", "Name": "n", "Driver": "bridge", "IPAM": {"Config": [{"Subnet": "172.24.0.0/16", "Gateway": "172.24.0.1"}]}}
    assert NetworkInfo.from_api(doc).gateway == "172.24.0.1"
    assert NetworkInfo.from_api({"Id": "x", "IPAM": {"Config": None}}).gateway == ""
    assert NetworkInfo.from_api({"Id": "x", "IPAM": "junk"}).gateway == ""
