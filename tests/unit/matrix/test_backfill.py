"""``envman matrix update`` backfills existing rows (envman/matrix/backfill.py): the Pythons and
platforms PyPI serves wheels of every package for that a row lacks are written into the row with
the file list they were read from, only where the row still validates, and a second run finds
nothing more. The file lists are PyPI's PEP 691 pages as recorded (tests/data/update/pypi/, each
trimmed to the release's own files): torch 1.13.1 serves cp311 manylinux x86_64 wheels and cp37-cp310
manylinux aarch64 ones, torchvision 0.14.1 cp37-cp310 on both, tensorflow-cpu 2.16.1 x86_64 only."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from packaging.version import Version

from envman.matrix import backfill as B, settle as S, update as U
from envman.matrix.index import NotFound, normalize, parse_json_page

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

RECORDED = Path(__file__).resolve().parents[2] / "data" / "update" / "pypi"
SIMPLE = "https://pypi.org/simple"


def page_url(name: str) -> str:
    return f"{SIMPLE}/{normalize(name)}/"


def files_of(name: str):
    found = sorted(RECORDED.glob(f"{normalize(name)}-[0-9]*.json"))
    if not found:
        raise NotFound("the index has no such project (404)", where=page_url(name))
    return [f for p in found for f in parse_json_page(p.read_bytes(), page_url(name), name).files]


def row(packages, python, *, cuda=None, platforms=("linux/amd64",), wheel_python=None, framework="torch",
        version="1.13.1", variant="cpu", arm64=None, **kw):
    defaults = dict(index_url=None, extra_index_url=None, find_links=None, source=("https://example.org/notes",),
                    wheel_python_source=("https://pypi.org/pypi/torch/json (tags)",) if wheel_python else (),
                    platform_source=())
    return SimpleNamespace(
        framework=framework, version=Version(version), variant=variant, cuda=Version(cuda) if cuda else None,
        python=tuple(Version(p) for p in python), platforms=tuple(platforms), packages=tuple(packages),
        packages_for=lambda plat: tuple(arm64 if plat == "linux/arm64" and arm64 else packages),
        wheel_python=tuple((k, tuple(Version(p) for p in v)) for k, v in (wheel_python or {}).items()),
        **{**defaults, **kw})


PY37_310 = ["3.7", "3.8", "3.9", "3.10"]


def test_a_python_every_package_serves_is_added_with_the_file_list_it_was_read_from():
    gap, unfilled = B.row_gap(row(["torch==1.13.1"], PY37_310), files_of, page_url)
    assert gap is not None and unfilled == []
    assert gap.changes["python"] == [*PY37_310, "3.11"]
    assert gap.added == ("Python 3.11",)
    assert gap.sources == (f"{SIMPLE}/torch/",)
    # no wheel_python in the row: the file list goes to its source list
    assert gap.changes["source"][0] == "https://example.org/notes"
    assert gap.changes["source"][1].startswith(f"{SIMPLE}/torch/ (envman matrix update: CPython tags")
    # aarch64 serves 3.7-3.10 only: with 3.11 listed, linux/arm64 is not every Python's
    assert "platforms" not in gap.changes


def test_a_companion_without_the_python_keeps_it_out_but_its_wheel_python_grows():
    wp = {"torch": PY37_310, "torchvision": PY37_310}
    gap, _ = B.row_gap(row(["torch==1.13.1", "torchvision==0.14.1"], PY37_310, wheel_python=wp, variant="cu117", cuda="11.7"),
                       files_of, page_url)
    assert gap is not None and "python" not in gap.changes
    assert gap.changes["wheel_python"] == {"torch": [*PY37_310, "3.11"], "torchvision": PY37_310}
    assert gap.added == ("wheel_python torch 3.11",)
    assert gap.changes["wheel_python_source"][0] == "https://pypi.org/pypi/torch/json (tags)"
    assert [s.split(" ")[0] for s in gap.changes["wheel_python_source"][1:]] == [f"{SIMPLE}/torch/", f"{SIMPLE}/torchvision/"]
    assert "platforms" not in gap.changes


def test_a_cpu_row_gets_the_platform_every_package_serves_a_gpu_row_is_only_reported():
    cpu, unfilled = B.row_gap(row(["torch==1.13.1", "torchvision==0.14.1"], PY37_310), files_of, page_url)
    assert cpu is not None and unfilled == []
    assert cpu.changes["platforms"] == ["linux/amd64", "linux/arm64"]
    assert [s.split(" ")[0] for s in cpu.changes["platform_source"]] == [f"{SIMPLE}/torch/", f"{SIMPLE}/torchvision/"]
    assert cpu.added == ("platform linux/arm64",)
    gpu, unfilled = B.row_gap(row(["torch==1.13.1", "torchvision==0.14.1"], PY37_310, cuda="11.7", variant="cu117"),
                              files_of, page_url)
    assert gpu is None and unfilled == ["linux/arm64"]
    two = [row(["torch==1.13.1", "torchvision==0.14.1"], PY37_310, cuda="11.7", variant=v) for v in ("cu117", "cu116")]
    found = B.find_gaps(SimpleNamespace(builds=two), ["torch"], files_of, page_url)
    assert found.gaps == []
    assert found.unfilled == ["torch 1.13.1 cu117, 1.13.1 cu116: the index serves linux/arm64 wheels of every package for "
                              "the row's Pythons; not added: a wheel's tags do not say that its linux/arm64 build carries CUDA"]
    assert B.find_gaps(SimpleNamespace(builds=two), ["tensorflow"], files_of, page_url) == B.Found()


def test_a_platform_missing_one_python_of_the_row_is_not_added():
    # 3.11 is listed: torch 1.13.1 has no cp311 aarch64 wheel
    gap, unfilled = B.row_gap(row(["torch==1.13.1"], [*PY37_310, "3.11"]), files_of, page_url)
    assert gap is None and unfilled == []


def test_a_package_without_an_aarch64_wheel_keeps_the_platform_out():
    # tensorflow-cpu has x86_64 wheels only; the arm64 build is named otherwise (packages_arm64)
    cpu = ["tensorflow-cpu==2.16.1"]
    kw = dict(framework="tensorflow", version="2.16.1")
    assert B.row_gap(row(cpu, ["3.9", "3.10", "3.11", "3.12"], **kw), files_of, page_url) == (None, [])
    gap, _ = B.row_gap(row(cpu, ["3.9", "3.10", "3.11", "3.12"], arm64=["tensorflow==2.16.1"], **kw), files_of, page_url)
    assert gap is not None and gap.changes["platforms"] == ["linux/amd64", "linux/arm64"]


def test_nothing_to_add_is_no_gap_and_what_says_nothing_adds_nothing():
    assert B.row_gap(row(["torch==1.13.1"], [*PY37_310, "3.11"], platforms=("linux/amd64",)), files_of, page_url) == (None, [])
    # a release the index lacks, a project it lacks, an unpinned requirement: nothing is said
    for pkgs in (["torch==1.13.9"], ["no-such-project==1.0"], ["torch>=1.13"]):
        assert B.row_gap(row(pkgs, ["3.8"]), files_of, page_url) == (None, [])


def test_pure_python_companions_do_not_narrow_and_a_pure_framework_says_nothing(tmp_path, monkeypatch):
    from envman.matrix.index import IndexFile

    pure = [IndexFile("helper-1.0-py3-none-any.whl", "https://x/helper-1.0-py3-none-any.whl")]
    old = [IndexFile("torch-1.13.1-cp34-cp34m-manylinux1_x86_64.whl", "https://x/t34.whl"),
           IndexFile("torch-1.13.1+cu116-cp312-cp312-manylinux1_x86_64.whl", "https://x/tl.whl")]

    def files(name):
        return pure if name == "helper" else files_of(name) + old

    gap, _ = B.row_gap(row(["torch==1.13.1", "helper==1.0"], PY37_310), files, page_url)
    assert gap is not None and gap.changes["python"] == [*PY37_310, "3.11"]  # not 3.4, not the +cu116 build's 3.12
    assert B.row_gap(row(["helper==1.0", "torch==1.13.1"], ["3.8"]), files, page_url) == (None, [])


def _apply(r, gap):
    """The row as it reads after the gap's changes are written."""
    c = gap.changes
    new = {**vars(r)}
    if "python" in c:
        new["python"] = tuple(Version(p) for p in c["python"])
    if "platforms" in c:
        new["platforms"] = tuple(c["platforms"])
    for k in ("platform_source", "wheel_python_source", "source"):
        if k in c:
            new[k] = tuple(c[k])
    if "wheel_python" in c:
        new["wheel_python"] = tuple((k, tuple(Version(p) for p in v)) for k, v in c["wheel_python"].items())
    return SimpleNamespace(**new)


@pytest.mark.parametrize("packages, python, wheel_python", [
    (["torch==1.13.1"], PY37_310, None),
    (["torch==1.13.1"], ["3.8"], {"torch": ["3.8"]}),
    (["torch==1.13.1", "torchvision==0.14.1"], ["3.9"], {"torch": ["3.9"], "torchvision": ["3.9"]}),
])
def test_a_second_run_finds_nothing_more(packages, python, wheel_python):
    r = row(packages, python, wheel_python=wheel_python)
    gap, _ = B.row_gap(r, files_of, page_url)
    assert gap is not None
    again, _ = B.row_gap(_apply(r, gap), files_of, page_url)
    assert again is None


# --- the edits of a matrix file ------------------------------------------------------------------

FILE = '''schema = 1
kind = "framework"
framework = "torch"

[[build]]
version = "1.13.1"
variant = "cu117"
python = ["3.7", "3.8"]
packages = ["torch==1.13.1"]
note = "cu117"

[[build]]
version = "1.13.1"
variant = "cpu"
python = [
  "3.7",
  "3.8",
]
packages = ["torch==1.13.1"]
note = "a = b"
[build.wheel_python]
torch = ["3.7", "3.8"]

[build.derived]
python = "x"

[[build]]
framework = "jax"
version = "1.13.1"
variant = "cpu"
python = ["3.9"]
'''


def test_an_edit_replaces_the_row_s_statements_and_sub_tables_and_leaves_the_rest():
    text = B.edit_row(FILE, ("torch", "1.13.1", "cpu"), {
        "python": ["3.7", "3.8", "3.9"], "wheel_python": {"torch": ["3.7", "3.8", "3.9"]},
        "platforms": ["linux/amd64", "linux/arm64"]})
    doc = tomllib.loads(text)
    cpu = doc["build"][1]
    assert cpu["python"] == ["3.7", "3.8", "3.9"] and cpu["wheel_python"] == {"torch": ["3.7", "3.8", "3.9"]}
    assert cpu["platforms"] == ["linux/amd64", "linux/arm64"] and cpu["derived"] == {"python": "x"}
    assert cpu["note"] == "a = b"
    assert doc["build"][0] == tomllib.loads(FILE)["build"][0] and doc["build"][2] == tomllib.loads(FILE)["build"][2]
    # every line outside the edited row is as it was
    before, after = FILE.split("[[build]]"), text.split("[[build]]")
    assert before[:2] == after[:2] and before[3] == after[3]
    # idempotent: the same changes again change nothing
    assert B.edit_row(text, ("torch", "1.13.1", "cpu"), {"python": ["3.7", "3.8", "3.9"]}) == text


def test_an_inline_table_is_replaced_in_place_and_a_row_level_framework_is_matched():
    text = FILE.replace('[build.wheel_python]\ntorch = ["3.7", "3.8"]\n', "").replace(
        'packages = ["torch==1.13.1"]\nnote = "a = b"', 'packages = ["torch==1.13.1"]\nwheel_python = { torch = ["3.7"] }\nnote = "a = b"')
    out = B.edit_row(text, ("torch", "1.13.1", "cpu"), {"wheel_python": {"torch": ["3.7", "3.8"]}})
    assert 'wheel_python = {torch = ["3.7", "3.8"]}\nnote = "a = b"' in out
    jax = B.edit_row(FILE, ("jax", "1.13.1", "cpu"), {"python": ["3.9", "3.10"]})
    assert tomllib.loads(jax)["build"][2]["python"] == ["3.9", "3.10"]
    assert tomllib.loads(jax)["build"][1] == tomllib.loads(FILE)["build"][1]


def test_an_edit_of_a_row_the_file_lacks_is_refused():
    with pytest.raises(KeyError):
        B.edit_row(FILE, ("torch", "9.9.9", "cpu"), {"python": ["3.9"]})
    with pytest.raises(KeyError):
        B.edit_row(FILE, ("tensorflow", "1.13.1", "cpu"), {"python": ["3.9"]})


def test_a_value_that_needs_escaping_is_written_as_toml():
    out = B.edit_row(FILE, ("torch", "1.13.1", "cu117"), {"source": ['a "quoted"\nline']})
    assert tomllib.loads(out)["build"][0]["source"] == ['a "quoted"\nline']


# --- the shipped matrix: found, written, validated, and found again -------------------------------


def _narrowed_shipped(tmp_path: Path) -> list[Path]:
    """A copy of the shipped matrices whose tensorflow 2.16.1 cpu row lacks Python 3.12."""
    from envman.cli import matrix_source

    out = []
    for f in matrix_source().shipped_files:
        shutil.copy(f, tmp_path / f.name)
        out.append(tmp_path / f.name)
    tf = tmp_path / "tensorflow.toml"
    text = tf.read_text()
    narrowed = B.edit_row(text, ("tensorflow", "2.16.1", "cpu"), {
        "python": ["3.9", "3.10", "3.11"],
        "wheel_python": {"tensorflow-cpu": ["3.9", "3.10", "3.11"], "tensorflow": ["3.9", "3.10", "3.11"]}})
    assert narrowed != text
    tf.write_text(narrowed)
    return out


def test_the_shipped_rows_get_back_what_pypi_serves_and_a_second_run_adds_nothing(tmp_path):
    from envman.matrix.load import load_files
    from envman.render.dockerfile import render_stack

    files = _narrowed_shipped(tmp_path)
    m = load_files(files)
    found = B.find_gaps(m, ["tensorflow"], files_of, page_url)
    mine = [g for g in found.gaps if g.key == ("tensorflow", "2.16.1", "cpu")]
    assert [g.added for g in mine] == [("Python 3.12", "wheel_python tensorflow 3.12", "wheel_python tensorflow-cpu 3.12")]
    gaps, skipped, planned = S.settle_gaps(mine, files, {}, render_stack)
    assert gaps == mine and skipped == []
    tf = tmp_path / "tensorflow.toml"
    assert list(planned) == [tf]
    row = next(b for b in tomllib.loads(planned[tf])["build"] if (b["version"], b["variant"]) == ("2.16.1", "cpu"))
    assert row["python"] == ["3.9", "3.10", "3.11", "3.12"]
    assert row["wheel_python"] == {"tensorflow-cpu": ["3.9", "3.10", "3.11", "3.12"], "tensorflow": ["3.9", "3.10", "3.11", "3.12"]}
    assert any(s.startswith(f"{SIMPLE}/tensorflow-cpu/ (envman matrix update") for s in row["wheel_python_source"])
    tf.write_text(planned[tf])
    again = B.find_gaps(load_files(files), ["tensorflow"], files_of, page_url)
    assert [g for g in again.gaps if g.key == ("tensorflow", "2.16.1", "cpu")] == []


def test_a_gap_whose_row_would_not_validate_is_skipped_with_why(tmp_path):
    from envman.matrix.load import load_files

    files = _narrowed_shipped(tmp_path)
    m = load_files(files)
    gap = B.Gap("tensorflow", "2.16.1", "cpu", {"python": ["3.9", "3.10", "3.11", "3.12", "3.13"]}, ("Python 3.13",),
                (f"{SIMPLE}/tensorflow-cpu/",))
    gaps, skipped, planned = S.settle_gaps([gap], files, {}, lambda stack: None)
    assert gaps == [] and planned == {}
    assert len(skipped) == 1 and skipped[0].startswith("backfill of tensorflow-2.16.1-cpu (cpu): ") and "3.13" in skipped[0]
    missing = B.Gap("tensorflow", "9.9.9", "cpu", {"python": ["3.12"]}, ("Python 3.12",), ())
    assert S.settle_gaps([missing], files, {}, lambda stack: None)[1] == ["tensorflow 9.9.9 cpu: its row is in no matrix file read"]
    assert m is not None


def test_an_overlay_gets_the_whole_edited_row(tmp_path):
    from envman.matrix.settle import plan_overlay

    files = _narrowed_shipped(tmp_path)
    gap = B.Gap("tensorflow", "2.16.1", "cpu", {"python": ["3.9", "3.10", "3.11", "3.12"], "wheel_python": {
        "tensorflow-cpu": ["3.9", "3.10", "3.11", "3.12"], "tensorflow": ["3.9", "3.10", "3.11", "3.12"]}}, ("Python 3.12",), ())
    out = tmp_path / "overlay.toml"
    gaps, skipped, planned = S.settle_gaps([gap], files, {}, lambda stack: None,
                                           overlay=lambda extra: plan_overlay(extra, out))
    assert gaps == [gap] and skipped == [] and list(planned) == [out]
    (only,) = tomllib.loads(planned[out])["build"]
    assert only["framework"] == "tensorflow" and only["python"][-1] == "3.12"
    assert only["packages_arm64"] == ["tensorflow==2.16.1"]  # the rest of the row as the shipped file states it


# --- through the CLI, against the recorded pages served on 127.0.0.1 ------------------------------


def test_update_backfills_the_rows_of_its_overlay_once(tmp_path, monkeypatch):
    import json

    from typer.testing import CliRunner

    from envman.cli import app
    from envman.matrix.write import overlay_text
    from envman.paths import matrices_dir
    from tests.support.index_server import IndexServer

    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    (tmp_path / "config").mkdir()
    shipped = tomllib.loads((matrices_dir() / "tensorflow.toml").read_text())
    row = next(b for b in shipped["build"] if (b["version"], b["variant"]) == ("2.16.1", "cpu"))
    narrowed = {**row, "python": ["3.9", "3.10", "3.11"],
                "wheel_python": {k: [p for p in v if p != "3.12"] for k, v in row["wheel_python"].items()}}
    out = tmp_path / "ours.toml"
    out.write_text(overlay_text([("tensorflow", narrowed)]))
    with IndexServer() as srv:
        for p in RECORDED.glob("*.json"):
            name = p.name.rsplit("-", 1)[0]
            srv.add(f"/simple/{name}/", p.read_bytes(), "application/vnd.pypi.simple.v1+json")

        def run():
            res = CliRunner().invoke(app, ["matrix", "update", "-f", "tensorflow", "--pip-index", srv.url + "/simple",
                                           "--no-torch-index", "-o", str(out), "--json"])
            assert res.exit_code == 0, res.output
            return json.loads(res.stdout)

        first = run()
        written = out.read_text()
        second = run()
    (mine,) = [line for line in first["backfilled"] if line.startswith("tensorflow 2.16.1 cpu: ")]
    assert "Python 3.12" in mine and f"{srv.url}/simple/tensorflow-cpu/" in mine
    assert first["written"] == [str(out)]
    got = next(b for b in tomllib.loads(written)["build"] if (b["version"], b["variant"]) == ("2.16.1", "cpu"))
    assert got["python"] == ["3.9", "3.10", "3.11", "3.12"] and got["wheel_python"]["tensorflow-cpu"][-1] == "3.12"
    assert any(s.startswith(f"{srv.url}/simple/tensorflow-cpu/ ") for s in got["wheel_python_source"])
    assert not [line for line in second["backfilled"] if line.startswith("tensorflow 2.16.1 cpu: ")]
    assert out.read_text() == written
    assert any(u.startswith("tensorflow ") and "2.16.1 gpu" in u and "linux/arm64 wheels" in u for u in first["unfilled"])


# --- a pure-Python framework (jax): the packages its wheel pins say the Pythons ---------------------


def requires_of(f):
    """Requires-Dist of a recorded wheel (jax 0.4.26's METADATA as PyPI serves it)."""
    path = RECORDED / (f.filename.split("-py3-")[0] + ".METADATA")
    return [line.split(": ", 1)[1] for line in path.read_text().splitlines() if line.startswith("Requires-Dist: ")]


JAX = ["3.9", "3.10", "3.11", "3.12"]


def test_pins_a_requirement_pulls_in_with_its_extras_on_linux():
    lines = requires_of(SimpleNamespace(filename="jax-0.4.26-py3-none-any.whl"))
    assert B.pinned_by(lines, "jax[cuda12]==0.4.26") == ["jaxlib==0.4.26", "jax-cuda12-plugin==0.4.26"]
    assert B.pinned_by(lines, "jax==0.4.26") == []  # no extra: nothing pinned exactly
    assert B.pinned_by(lines, "jax[cpu]==0.4.26") == ["jaxlib==0.4.26"]
    assert B.pinned_by(lines, "jax[cuda12_pip]==0.4.26") == []  # a local version (+cuda12.cudnn89) is no PyPI pin
    assert B.pinned_by(["a==1; python_version >= '3.10'", "b>=2", "c==3; sys_platform == 'win32'",
                        "d==4; sys_platform == 'linux'", "not a requirement"], "x==1") == ["d==4"]
    assert B.pinned_by(["a==1"], "not a requirement[") == []


def test_a_pure_framework_is_judged_by_the_packages_its_wheel_pins():
    pins_of = B.pins_from(files_of, requires_of)
    narrowed = row(["jax[cuda12]==0.4.26"], JAX[:3], framework="jax", version="0.4.26", variant="cuda12", cuda="12.3",
                   wheel_python={"jax": JAX[:3]})
    gap, unfilled = B.row_gap(narrowed, files_of, page_url, pins_of)
    assert gap is not None and gap.changes["python"] == JAX
    assert gap.changes["wheel_python"] == {"jax": JAX}  # the pure wheel admits 3.12 (Requires-Python >=3.9)
    assert gap.sources == (f"{SIMPLE}/jaxlib/", f"{SIMPLE}/jax-cuda12-plugin/")
    # jaxlib has aarch64 wheels, the CUDA 12 plugin none: no platform to add or report
    assert "platforms" not in gap.changes and unfilled == []
    # without reading what jax pins, a pure wheel says nothing
    assert B.row_gap(narrowed, files_of, page_url) == (None, [])
    # the shipped figures (3.9-3.12) are what the index serves: nothing to add
    full = row(["jax[cuda12]==0.4.26"], JAX, framework="jax", version="0.4.26", variant="cuda12", cuda="12.3",
               wheel_python={"jax": JAX})
    assert B.row_gap(full, files_of, page_url, pins_of) == (None, [])
    # a CPU build pins jaxlib only, which serves aarch64 for every Python: the platform is added
    cpu, _ = B.row_gap(row(["jax[cpu]==0.4.26"], JAX, framework="jax", version="0.4.26"), files_of, page_url, pins_of)
    assert cpu is not None and cpu.changes["platforms"] == ["linux/amd64", "linux/arm64"]


def test_pins_are_read_once_per_requirement_and_a_missing_wheel_pins_nothing():
    reads = []
    pins_of = B.pins_from(files_of, lambda f: reads.append(f.filename) or requires_of(f))
    assert pins_of("jax[cuda12]==0.4.26") == pins_of("jax[cuda12]==0.4.26") == ["jaxlib==0.4.26", "jax-cuda12-plugin==0.4.26"]
    assert reads == ["jax-0.4.26-py3-none-any.whl"]
    assert pins_of("jax[cuda12]==0.4.99") == [] and pins_of("nothing-here==1.0") == [] and pins_of("jax>=0.4") == []
