"""``envman matrix update`` against recorded index pages and real zip wheels served on 127.0.0.1:
PEP 691 JSON, PEP 503 HTML with relative URLs, PEP 658 metadata, Range-read wheels, a server
without Range support, an unreachable index; and the Requires-Dist / wheel-tag rules."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envman.matrix import index as idx

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib
from envman.matrix.index import Http, IndexFileError, IndexUnreachable, fetch_project, read_wheel_metadata
from envman.matrix.wheels import cuda_pins, pinned_version, wheel_tags
from tests.support.cli import run_envman
from tests.support.index_server import IndexServer, make_wheel

# --- Requires-Dist: every style in use ----------------------------------------------------------

PIN_CASES = [
    # (requires-dist lines, extras, machine, cuda (value, how), cudnn (value, how))
    (["nvidia-cuda-runtime-cu12==12.8.90; platform_system == 'Linux' and platform_machine == 'x86_64'",
      "nvidia-cudnn-cu12==9.10.2.21; platform_system == 'Linux' and platform_machine == 'x86_64'"],
     (), "x86_64", ("12.8", "pinned"), ("9.10.2.21", "pinned")),
    (["nvidia-cuda-runtime-cu12==12.8.90; platform_system == 'Linux' and platform_machine == 'x86_64'"],
     (), "aarch64", None, None),  # the marker excludes arm64: no CUDA there
    (["cuda-toolkit[cublas,cudart,cufft]==13.2.2; platform_system == \"Linux\"",
      "nvidia-cudnn-cu13==9.26.0.51; platform_system == \"Linux\""], (), "aarch64", ("13.2", "pinned"), ("9.26.0.51", "pinned")),
    (["nvidia-cuda-runtime==13.0.96", "nvidia-cudnn-cu13==9.13.0.50"], (), "x86_64", ("13.0", "pinned"), ("9.13.0.50", "pinned")),
    (["nvidia-cuda-runtime~=13.0; extra == \"cuda\"", "nvidia-cudnn-cu13~=9.0; extra == \"cudnn\""],
     ("cuda", "cudnn"), "x86_64", ("13", "major"), ("9", "major")),
    (["nvidia-cuda-runtime~=13.0; extra == \"cuda\""], (), "x86_64", None, None),  # extra not selected
    (["nvidia-cuda-runtime-cu12>=12.1.105; sys_platform == \"linux\" and extra == \"with-cuda\"",
      "nvidia-cuda-nvcc-cu12>=12.6.85; sys_platform == \"linux\" and extra == \"with-cuda\"",
      "nvidia-cudnn-cu12<10.0,>=9.10.2.21; sys_platform == \"linux\" and extra == \"with-cuda\""],
     ("with-cuda",), "x86_64", ("12.1", "at least"), ("9.10.2.21", "at least")),
    (["nvidia-cuda-runtime-cu12<13.0,>=12.5.82; extra == \"and-cuda\"", "nvidia-cudnn-cu12<10.0,>=9.3.0.75; extra == \"and-cuda\""],
     ("and-cuda",), "x86_64", ("12.5", "at least"), ("9.3.0.75", "at least")),
    (["nvidia-cudnn-cu12>=9.0,<10; extra == 'x'"], ("x",), "x86_64", None, ("9", "major")),
    (["nvidia-cuda-nvrtc-cu11==11.8.89", "nvidia-cudnn-cu11==8.7.0.84"], (), "x86_64", ("11.8", "pinned"), ("8.7.0.84", "pinned")),
    (["numpy>=1.21", "not a requirement ;;", "nvidia_cuda_runtime_cu12 == 12.4.127"], (), "x86_64", ("12.4", "pinned"), None),
]


@pytest.mark.parametrize("lines,extras,machine,cuda,cudnn", PIN_CASES)
def test_cuda_pins_every_style(lines, extras, machine, cuda, cudnn) -> None:
    pins = cuda_pins(lines, extras, machine=machine)
    assert ((pins.cuda.value, pins.cuda.how) if pins.cuda else None) == cuda
    assert ((pins.cudnn.value, pins.cudnn.how) if pins.cudnn else None) == cudnn


def test_jax_extra_gives_the_cuda_major_without_a_version() -> None:
    lines = ['jax-cuda13-plugin[with-cuda]<=0.9.0,>=0.9.0; extra == "cuda13"']
    assert cuda_pins(lines, ["cuda13"]).cuda_major == 13
    assert cuda_pins(lines, []).cuda_major is None


def test_torchvision_requirement_on_torch() -> None:
    assert str(pinned_version(["numpy", "torch (>=2.14.0)"], "torch")) == ">=2.14.0"
    assert str(pinned_version(["torch==2.7.1"], "Torch")) == "==2.7.1"
    assert pinned_version(["numpy"], "torch") is None


@pytest.mark.parametrize("filename,rp,pythons,threaded,platforms", [
    ("torch-2.12.0-cp313-cp313t-manylinux_2_28_x86_64.whl", None, (), ("3.13",), ("linux/amd64",)),
    ("torch-2.12.0+cu126-cp310-cp310-manylinux_2_28_aarch64.whl", None, ("3.10",), (), ("linux/arm64",)),
    ("x-1.0-cp311-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", "<3.14", ("3.11", "3.12", "3.13"), (), ("linux/amd64",)),
    ("tv-0.29.2-py3-none-manylinux_2_28_x86_64.whl", ">=3.10,!=3.14.1", ("3.10", "3.11", "3.12", "3.13", "3.14", "3.15"), (), ("linux/amd64",)),
    ("x-1.0-cp312-cp312-musllinux_1_2_x86_64.whl", None, ("3.12",), (), ()),
    ("x-1.0-cp312-cp312-macosx_14_0_arm64.whl", None, ("3.12",), (), ()),
    ("x-1.0-cp312-cp312-win_amd64.whl", None, ("3.12",), (), ()),
])
def test_wheel_tags(filename, rp, pythons, threaded, platforms) -> None:
    t = wheel_tags(filename, rp)
    assert t is not None
    assert (t.pythons, t.free_threaded, t.platforms) == (pythons, threaded, platforms)


def test_wheel_tags_local_version_and_garbage() -> None:
    t = wheel_tags("torch-2.12.0+cu126-cp312-cp312-manylinux_2_28_x86_64.whl")
    assert t is not None and t.local == "cu126" and str(t.version) == "2.12.0"
    assert wheel_tags("torch-2.12.0.tar.gz") is None
    assert wheel_tags("not-a-wheel.whl") is None


# --- the index: pages, PEP 658, ranges ------------------------------------------------------------

WHEEL = "demo-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
REQS = ["cuda-toolkit[cudart]==13.0.2; platform_system == 'Linux'", "nvidia-cudnn-cu13==9.20.0.48"]


def test_pep691_json_with_pep658_and_relative_urls() -> None:
    wheel, meta = make_wheel(WHEEL, REQS)
    with IndexServer() as srv:
        srv.add("/files/" + WHEEL, wheel)
        srv.add("/files/" + WHEEL + ".metadata", meta)
        srv.add("/simple/demo/", json.dumps({
            "meta": {"api-version": "1.1"}, "name": "demo",
            "files": [{"filename": WHEEL, "url": "../../files/" + WHEEL, "hashes": {},
                       "core-metadata": {"sha256": hashlib.sha256(meta).hexdigest()}, "upload-time": "2026-05-13T14:55:53Z"}],
        }), "application/vnd.pypi.simple.v1+json")
        http = Http(timeout=5, retries=0)
        page = fetch_project(http, srv.url + "/simple", "Demo")
        assert page.format == "json"
        f = page.files[0]
        assert f.url == srv.url + "/files/" + WHEEL
        md = read_wheel_metadata(http, f)
        assert md.how == "pep658" and md.requires_dist == tuple(REQS)
        assert all(p != "/files/" + WHEEL for p, _ in srv.requests), "the wheel itself must not be fetched"


def test_pep658_hash_mismatch_is_refused() -> None:
    wheel, meta = make_wheel(WHEEL, REQS)
    with IndexServer() as srv:
        srv.add("/files/" + WHEEL + ".metadata", meta)
        srv.add("/simple/demo/", json.dumps({"files": [{"filename": WHEEL, "url": "/files/" + WHEEL, "hashes": {},
                                                         "core-metadata": {"sha256": "0" * 64}}]}),
                "application/vnd.pypi.simple.v1+json")
        http = Http(timeout=5, retries=0)
        with pytest.raises(IndexFileError, match="does not match"):
            read_wheel_metadata(http, fetch_project(http, srv.url + "/simple", "demo").files[0])


def test_pep503_html_relative_urls_and_range_read_of_a_real_wheel() -> None:
    wheel, _ = make_wheel(WHEEL, REQS, requires_python=">=3.10", padding=3 * 1024 * 1024)
    with IndexServer() as srv:
        srv.add("/packages/ab/" + WHEEL, wheel)
        srv.add("/simple/demo/", f'<html><body><a href="../../packages/ab/{WHEEL}#sha256=00" '
                                 f'data-requires-python="&gt;=3.10">{WHEEL}</a><a href="../../packages/ab/y.tar.gz">y</a>'
                                 f'<a data-yanked="" href="/packages/ab/demo-0.9-py3-none-any.whl">old</a></body></html>', "text/html")
        http = Http(timeout=5, retries=0)
        page = fetch_project(http, srv.url + "/simple/", "demo")
        assert page.format == "html"
        f = page.files[0]
        assert f.url == srv.url + "/packages/ab/" + WHEEL and f.requires_python == ">=3.10" and not f.metadata
        assert page.files[2].yanked
        md = read_wheel_metadata(http, f)
        assert md.how == "range" and md.requires_dist == tuple(REQS) and md.requires_python == ">=3.10"
        assert http.bytes_read < len(wheel) / 2, "only the zip directory and the member may be read"
        assert all(rng for p, rng in srv.requests if p.endswith(".whl"))


def test_server_without_ranges_small_wheel_is_downloaded_whole() -> None:
    wheel, _ = make_wheel(WHEEL, REQS)
    with IndexServer(ranges=False) as srv:
        srv.add("/w/" + WHEEL, wheel)
        f = idx.IndexFile(WHEEL, srv.url + "/w/" + WHEEL)
        md = read_wheel_metadata(Http(timeout=5, retries=0), f)
        assert md.how == "download" and md.requires_dist == tuple(REQS)


def test_server_without_ranges_large_wheel_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    wheel, _ = make_wheel(WHEEL, REQS, padding=200_000)
    monkeypatch.setattr(idx, "FULL_DOWNLOAD_LIMIT", 50_000)
    with IndexServer(ranges=False) as srv:
        srv.add("/w/" + WHEEL, wheel)
        with pytest.raises(IndexFileError) as exc:
            read_wheel_metadata(Http(timeout=5, retries=0), idx.IndexFile(WHEEL, srv.url + "/w/" + WHEEL))
        assert "ignores HTTP range requests" in exc.value.line() and "\n" not in exc.value.line()


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_unreachable_index_is_one_line_and_bounded() -> None:
    http = Http(timeout=2, retries=1, backoff=0.01)
    with pytest.raises(IndexUnreachable) as exc:
        fetch_project(http, f"http://127.0.0.1:{_closed_port()}/simple", "torch")
    assert http.requests == 2 and "cannot reach the index" in exc.value.line()


# --- the command end to end ------------------------------------------------------------------------

TORCH_V, TV_V = "2.99.0", "0.114.0"


def _torch_index(srv: IndexServer, *, variants: bool = False, threaded: tuple[str, ...] = ()) -> None:
    files = []
    for plat in ("x86_64", "aarch64"):
        for py in ("cp311", "cp312", "cp313", *threaded):
            name = f"torch-{TORCH_V}-{py.rstrip('t')}-{py}-manylinux_2_28_{plat}.whl"  # cp313-cp313t: free-threaded
            reqs = ["filelock", "cuda-toolkit[cudart,cublas]==13.0.2; platform_system == 'Linux'",
                    "nvidia-cudnn-cu13==9.20.0.48; platform_system == 'Linux'"]
            w, _ = make_wheel(name, reqs, requires_python=">=3.11")
            srv.add("/f/" + name, w)
            files.append({"filename": name, "url": "../../f/" + name, "hashes": {}, "upload-time": "2026-11-01T10:00:00Z"})
    # a foreign wheel on the page must not become a torch release
    w, _ = make_wheel("evil-9.9.9-cp312-cp312-manylinux_2_28_x86_64.whl", ["cuda-toolkit==13.0.2"])
    srv.add("/f/evil.whl", w)
    files.append({"filename": "evil-9.9.9-cp312-cp312-manylinux_2_28_x86_64.whl", "url": "/f/evil.whl", "hashes": {}})
    srv.add("/simple/torch/", json.dumps({"files": files}), "application/vnd.pypi.simple.v1+json")
    tv = f"torchvision-{TV_V}-py3-none-manylinux_2_28_x86_64.whl"
    w, meta = make_wheel(tv, ["numpy", f"torch (>={TORCH_V})"], requires_python=">=3.12")
    srv.add("/f/" + tv, w)
    srv.add("/f/" + tv + ".metadata", meta)
    srv.add("/simple/torchvision/", f'<a href="/f/{tv}" data-core-metadata="true">{tv}</a>', "text/html")
    if variants:
        name = f"torch-{TORCH_V}+cu126-cp312-cp312-manylinux_2_28_x86_64.whl"
        w, meta = make_wheel(name, ["nvidia-cuda-runtime-cu12==12.6.77", "nvidia-cudnn-cu12==9.5.1.17"])
        srv.add("/whl/f/" + name.replace("+", "%2B"), w)
        srv.add("/whl/torch/", f'<a href="../f/{name.replace("+", "%2B")}">{name}</a>', "text/html")
        tvv = f"torchvision-{TV_V}+cu126-cp312-cp312-manylinux_2_28_x86_64.whl"
        w, meta = make_wheel(tvv, [f"torch=={TORCH_V}"])
        srv.add("/whl/cu126/f/" + tvv.replace("+", "%2B"), w)
        srv.add("/whl/cu126/torchvision/", f'<a href="../f/{tvv.replace("+", "%2B")}">{tvv}</a>', "text/html")


def _run(*args: str) -> tuple[int, str]:
    from envman.cli import app

    res = CliRunner().invoke(app, list(args))
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        import traceback

        return res.exit_code, "".join(traceback.format_exception(res.exception))
    return res.exit_code, res.output


@pytest.fixture
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "config"
    d.mkdir()
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(d))
    monkeypatch.delenv("ENVMAN_MATRIX", raising=False)
    from envman.matrix import load

    load._CACHE.clear()
    return d


def test_update_writes_a_valid_overlay_that_resolves_and_renders(tmp_path: Path, config_dir: Path) -> None:
    out = tmp_path / "ours.toml"
    with IndexServer() as srv:
        _torch_index(srv, variants=True)
        rc, text = _run("matrix", "update", "-f", "torch", "--pip-index", srv.url + "/simple",
                        "--torch-index", srv.url + "/whl", "-o", str(out), "--json")
    assert rc == 0, text
    summary = json.loads(text)
    assert summary["new_releases"] == {"torch": [TORCH_V]}
    assert summary["requests"] > 0 and summary["written"] == [str(out)]
    doc = tomllib.loads(out.read_text())
    rows = {r["variant"]: r for r in doc["build"]}
    d = rows["cu130"]
    assert (d["cuda"], d["cudnn"], d["python"], d["default"]) == ("13.0", "9.20.0.48", ["3.12", "3.13"], True)
    assert d["packages"] == [f"torch=={TORCH_V}", f"torchvision=={TV_V}"]
    assert d["platforms"] == ["linux/amd64"]  # torchvision has no arm64 wheel here
    assert d["arch_status"] == "unconfirmed" and "sass" in d["note"]
    assert srv.url + "/f/torch-2.99.0-cp313-cp313-manylinux_2_28_x86_64.whl" in d["derived"]["cuda"]
    assert "pinned by Requires-Dist 'cuda-toolkit" in d["derived"]["cuda"]
    v = rows["cu126"]
    assert (v["cuda"], v["cudnn"], v["index_url"], v["default"]) == ("12.6", "9.5.1.17", srv.url + "/whl/cu126", False)
    rc, text = _run("matrix", "validate", str(out))
    assert rc == 0, text
    rc, text = _run("matrix", "show", f"torch-{TORCH_V}-cuda13.0", "--matrix", str(out), "--json")
    assert rc == 0, text
    assert json.loads(text)["cudnn"] == "9.20.0.48"
    rc, text = _run("--matrix", str(out), "render", f"torch-{TORCH_V}-cuda12.6", "-o", "-")
    assert rc == 0 and f"torch=={TORCH_V}" in text


def test_update_from_config_files_and_rerun_is_incremental(tmp_path: Path, config_dir: Path) -> None:
    out = tmp_path / "ours.toml"
    (config_dir / "config.toml").write_text(f'[matrix]\nfiles = ["{out}"]\n')
    with IndexServer() as srv:
        _torch_index(srv)
        rc, text = _run("matrix", "update", "-f", "torch", "--pip-index", srv.url + "/simple", "--no-torch-index", "-o", str(out))
        assert rc == 0, text
        from envman.matrix import load

        load._CACHE.clear()
        # no ENVMAN_MATRIX, no --matrix: the config's [matrix] files make the row resolvable
        rc, text = _run("matrix", "show", f"torch-{TORCH_V}", "--json")
        assert rc == 0, text
        rc, text = _run("matrix", "update", "-f", "torch", "--pip-index", srv.url + "/simple", "--no-torch-index", "-o", str(out), "--json")
    assert rc == 0 and json.loads(text)["new_rows"] == []


def test_check_exits_1_when_behind_and_writes_nothing(tmp_path: Path, config_dir: Path) -> None:
    with IndexServer() as srv:
        _torch_index(srv)
        rc, text = _run("matrix", "update", "--check", "-f", "torch", "--pip-index", srv.url + "/simple", "--json")
    assert rc == 1 and json.loads(text)["new_releases"] == {"torch": [TORCH_V]}


def _subprocess(*args: str) -> tuple[int, str, str]:
    import os
    import subprocess

    p = run_envman(args, env=dict(os.environ), timeout=120)
    return p.returncode, p.stdout, p.stderr


def test_unreachable_index_writes_nothing(tmp_path: Path, config_dir: Path) -> None:
    out = tmp_path / "ours.toml"
    rc, _, text = _subprocess("matrix", "update", "-f", "torch", "--pip-index", f"http://127.0.0.1:{_closed_port()}/simple",
                    "--timeout", "2", "-o", str(out))
    assert rc == 1 and not out.exists()
    assert "cannot reach the index" in text and "Traceback" not in text and len(text.strip().splitlines()) == 1


def test_bad_options_are_exit_2(tmp_path: Path, config_dir: Path) -> None:
    for args in (["-f", "caffe"], ["--write", "-o", str(tmp_path / "x.toml")], ["--pip-index", "ftp://x/simple"],
                 ["--torch-index", "https://x/whl; rm -rf /"]):
        rc, out, err = _subprocess("matrix", "update", *args)
        assert rc == 2 and len(err.strip().splitlines()) == 1 and not out, (args, err)
    (config_dir / "config.toml").write_text('[matrix]\nfiles = "not-a-list"\n')
    rc, _, err = _subprocess("matrix", "ls")
    assert rc == 2 and "[matrix].files" in err


def test_overlay_that_is_not_a_framework_file_is_refused(tmp_path: Path, config_dir: Path) -> None:
    out = tmp_path / "gpus.toml"
    out.write_text('schema = 1\nkind = "gpus"\n')
    with IndexServer() as srv:
        _torch_index(srv)
        rc, _, err = _subprocess("matrix", "update", "-f", "torch", "--pip-index", srv.url + "/simple", "--no-torch-index", "-o", str(out))
    assert "not a framework matrix file" in err
    assert rc == 2 and out.read_text() == 'schema = 1\nkind = "gpus"\n'


def test_example_workflows_are_valid_github_workflows() -> None:
    import shutil
    import subprocess

    workflows = sorted((Path(__file__).resolve().parents[3] / "examples" / "github-actions").glob("*.yml"))
    assert len(workflows) >= 2
    exe = shutil.which("check-jsonschema") or str(Path(sys.executable).with_name("check-jsonschema"))
    if not Path(exe).exists():
        if os.environ.get("CI"):
            pytest.fail("check-jsonschema is not installed: pip install -e '.[test]'")
        pytest.skip("check-jsonschema is not installed (pip install -e '.[test]')")
    res = subprocess.run([exe, "--builtin-schema", "vendor.github-workflows", *map(str, workflows)], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "envman matrix update --check" in (workflows[0].parent / "matrix-update.yml").read_text()


def test_doctor_matrix_freshness_and_update_warnings() -> None:
    import datetime

    from envman.run.doctor import matrix_problems, matrix_freshness
    from envman.matrix.load import load_matrix

    m = load_matrix(shipped=True)
    fresh = matrix_freshness(m, datetime.date(2026, 11, 23), {"torch": ["9.0.0"]})
    dated = [b for b in m.builds if b.released]
    if dated:
        newest = max(b.released for b in dated)
        assert fresh["newest_release"] == newest
        assert fresh["age_days"] == (datetime.date(2026, 11, 23) - datetime.date.fromisoformat(newest)).days
    assert fresh["newest_version"]["torch"] == str(max(b.version for b in m.builds if b.framework == "torch"))
    probs = matrix_problems(fresh)
    assert len(probs) == 1 and "torch 9.0.0" in probs[0].message and probs[0].level == "warning"
    assert "could not check" in matrix_problems(matrix_freshness(m, datetime.date.today(), None, "x: down"))[0].message


def test_four_part_versions_resolve_exactly() -> None:
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve

    m = load_matrix(shipped=True)
    versions = {str(b.version) for b in m.builds if b.framework == "jax"}
    if not {"0.9.0", "0.9.0.1"} <= versions:
        pytest.skip("the shipped matrix has no JAX 0.9.0 and 0.9.0.1")
    assert resolve(m, "jax-0.9.0-cuda12").framework_version == "0.9.0"
    assert resolve(m, "jax-0.9.0.1-cuda12").framework_version == "0.9.0.1"
    newest_09 = max((b.version for b in m.builds if b.framework == "jax" and b.version.release[:2] == (0, 9)))
    assert resolve(m, "jax-0.9-cuda12").framework_version == str(newest_09)


def test_a_zip_directory_claiming_a_huge_read_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    wheel, _ = make_wheel(WHEEL, REQS, padding=300_000)
    monkeypatch.setattr(idx, "MAX_RANGE_BYTES", 1000)
    monkeypatch.setattr(idx, "TAIL_BYTES", 100)  # the directory is not in the first answer
    with IndexServer() as srv:
        srv.add("/w/" + WHEEL, wheel)
        rf = idx.RangeFile(Http(timeout=5, retries=0), srv.url + "/w/" + WHEEL)
        assert rf.size == len(wheel) and rf.read(10) == wheel[:10]  # small reads are served
        rf.seek(len(wheel) - 5000)  # not fetched yet: a read this large is refused
        with pytest.raises(IndexFileError, match="byte read"):
            rf.read(5000)


def test_a_server_that_never_answers_is_bounded() -> None:
    import threading
    import time

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(4)
    port = s.getsockname()[1]
    stop = threading.Event()
    conns = []

    def accept() -> None:
        s.settimeout(0.2)
        while not stop.is_set():
            try:
                conns.append(s.accept()[0])  # accept, then say nothing
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        started = time.monotonic()
        with pytest.raises(IndexUnreachable):
            fetch_project(Http(timeout=1, retries=1, backoff=0.01), f"http://127.0.0.1:{port}/simple", "torch")
        assert time.monotonic() - started < 10
    finally:
        stop.set()
        t.join(timeout=5)
        for c in conns:
            c.close()
        s.close()


def test_write_appends_to_the_shipped_file_and_keeps_it(tmp_path: Path) -> None:
    from envman.matrix.load import parse_file
    from envman.matrix.settle import plan_shipped
    from envman.matrix.update import NewRow
    from envman.matrix.write import atomic_write_all
    from envman.paths import matrices_dir

    original = (matrices_dir() / "jax.toml").read_text()
    (tmp_path / "jax.toml").write_text(original)
    row = NewRow("jax", {"version": "9.9.9", "variant": "cuda13", "cuda": "13.0", "python": ["3.12"],
                         "packages": ["jax[cuda13]==9.9.9"], "sass": ["9.0"], "ptx": [], "source": ["https://x.example/"],
                         "status": "confirmed", "note": 'a "quoted" note', "derived": {"cuda": "pinned (https://x.example/)"}}, ())
    atomic_write_all(plan_shipped([row], tmp_path))
    text = (tmp_path / "jax.toml").read_text()
    assert text.startswith(original) and not list(tmp_path.glob(".*.tmp"))
    _, builds = parse_file(tmp_path / "jax.toml")
    new = [b for b in builds if str(b.version) == "9.9.9"]
    assert len(new) == 1 and new[0].note == 'a "quoted" note' and dict(new[0].derived)["cuda"].startswith("pinned")


def test_update_derives_the_free_threaded_pythons_of_a_row(tmp_path: Path, config_dir: Path) -> None:
    out = tmp_path / "ours.toml"
    with IndexServer() as srv:
        _torch_index(srv, threaded=("cp313t", "cp314t"))  # cp314t: no regular 3.14 wheel, so not claimed
        rc, text = _run("matrix", "update", "-f", "torch", "--pip-index", srv.url + "/simple", "--no-torch-index",
                        "-o", str(out), "--json")
    assert rc == 0, text
    d = {r["variant"]: r for r in tomllib.loads(out.read_text())["build"]}["cu130"]
    assert d["python"] == ["3.12", "3.13"] and d["python_freethreaded"] == ["3.13"]
    assert "free-threaded CPython tags" in d["derived"]["python_freethreaded"]
    rc, text = _run("matrix", "show", f"torch-{TORCH_V}-cuda13.0-py3.13t", "--matrix", str(out), "--json")
    assert rc == 0 and json.loads(text)["freethreaded"] is True, text
