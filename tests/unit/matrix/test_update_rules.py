"""``envman matrix update`` by rule (issue 23, the mutation run over envman/matrix/update.py): which
releases are new, which CUDA, cuDNN, Pythons and platforms a derived row states and from where,
what a row inherits (and says it inherited), what is refused, and what is written. The index is
an in-memory stand-in for the recorded pages of tests/unit/matrix/test_update.py (the same
IndexFile records and Requires-Dist lines, no server): every function runs in this process."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st
from packaging.version import Version

from envman.matrix import gaps as G, refresh as R, settle as S, update as U


def _row(framework="torch", version="2.8.0", variant="cu128", cuda="12.8"):
    return SimpleNamespace(framework=framework, version=Version(version), variant=variant,
                           cuda=Version(cuda) if cuda else None)


PREVIOUS = [  # (rows, version, variant, cuda major, the row chosen)
    ([_row(variant="cu128"), _row(version="2.7.0", variant="cu126", cuda="12.6")], "2.9.0", "cu126", 12, ("2.7.0", "cu126")),
    ([_row(variant="cu128"), _row(version="2.7.0", variant="cu126", cuda="12.6")], "2.9.0", "cu130", 12, ("2.8.0", "cu128")),
    ([_row(variant="cu128"), _row(version="2.8.0", variant="cu126", cuda="12.6")], "2.9.0", "cu130", 12, ("2.8.0", "cu128")),
    ([_row(variant="cu118", cuda="11.8"), _row(version="2.7.0", variant="cu126", cuda="12.6")], "2.9.0", "cu130", 12,
     ("2.7.0", "cu126")),
    ([_row(variant="cu118", cuda="11.8")], "2.9.0", "cu130", 13, ("2.8.0", "cu118")),
    ([_row(variant="cpu", cuda=None), _row(variant="cu118", cuda="11.8")], "2.9.0", "cu130", None, ("2.8.0", "cpu")),
    ([_row(variant="cpu", cuda=None)], "2.9.0", "cu130", 13, None),
    ([_row(version="3.0.0")], "2.9.0", "cu128", 12, None),
    ([_row(version="2.9.0")], "2.9.0", "cu128", 12, None),
    ([_row(framework="jax", version="0.4.0")], "2.9.0", "cu128", 12, None),
]


@pytest.mark.parametrize("rows,version,variant,major,chosen", PREVIOUS)
def test_the_row_a_new_one_inherits_from(rows, version, variant, major, chosen):
    """Same variant, else same CUDA major, else any row of the same kind (GPU or CPU); always an
    earlier release of the same framework; the newest (then the highest CUDA) among them."""
    got = U.previous_row(SimpleNamespace(builds=rows), "torch", Version(version), variant, major)
    assert (None if got is None else (str(got.version), got.variant)) == chosen


# --------------------------------------------------------------------------- an index in memory

import json  # noqa: E402
import os  # noqa: E402
from pathlib import Path  # noqa: E402

from envman.matrix.index import Http, IndexFile, NotFound, ProjectPage, WheelMetadata, normalize, project_url  # noqa: E402
from envman.matrix.model import Arch  # noqa: E402

PYPI = "https://pypi.example/simple"
TORCH = "https://torch.example/whl"
GOLDEN = Path(__file__).resolve().parents[2] / "data" / "update"


class Index:
    """Project pages and wheel metadata as an index serves them (``fetch_project`` and
    ``read_wheel_metadata`` answer from here; a project it lacks is a 404)."""

    def __init__(self) -> None:
        self.pages: dict[tuple[str, str], list[IndexFile]] = {}
        self.meta: dict[str, WheelMetadata] = {}
        self.fetched: list[tuple[str, str]] = []

    def add(self, project: str, filename: str, requires=(), *, index: str = PYPI, requires_python: str | None = None,
            page_rp: str | None = None, upload: str | None = "2026-05-01T10:00:00Z", yanked: bool = False) -> "Index":
        url = f"{index}/f/{filename}"
        self.pages.setdefault((index, normalize(project)), []).append(
            IndexFile(filename, url, requires_python=page_rp, yanked=yanked, upload_time=upload))
        self.meta[url] = WheelMetadata(project, (filename.split("-") + [""])[1], tuple(requires), requires_python, url, "pep658")
        return self

    def install(self, monkeypatch) -> "Index":
        def fetch(http, index, project):
            key = (index.rstrip("/"), normalize(project))
            self.fetched.append(key)
            if key not in self.pages:
                raise NotFound("the index has no such project (404)", where=project_url(index, project))
            return ProjectPage(project, project_url(index, project), tuple(self.pages[key]), "json")

        monkeypatch.setattr(U, "fetch_project", fetch)
        monkeypatch.setattr(U, "read_wheel_metadata", lambda http, f: self.meta[f.url])
        return self


def _build(framework, version, variant, cuda=None, cudnn=None, sass=(), ptx=(), sass_arm64=None, ptx_arm64=None):
    arch = lambda xs: None if xs is None else tuple(Arch.parse(a) for a in xs)  # noqa: E731
    packages = (f"{framework}=={version}",)
    return SimpleNamespace(framework=framework, version=Version(version), variant=variant,
                           cuda=Version(cuda) if cuda else None, cudnn=cudnn, sass=arch(sass), ptx=arch(ptx),
                           sass_arm64=arch(sass_arm64), ptx_arm64=arch(ptx_arm64), packages=packages,
                           packages_for=lambda platform: packages, python=(Version("3.12"),), platforms=("linux/amd64",),
                           index_url=None, extra_index_url=None, find_links=None, wheel_python=(),
                           wheel_python_source=(), platform_source=(), source=(),
                           name=f"{framework}-{version}-" + (f"cuda{cuda}" if cuda else "cpu"))


def _release(version, sm, updates=()):
    v = Version(version)
    return SimpleNamespace(version=v, key=f"{v.major}.{v.minor}", sm=tuple(Arch.parse(a) for a in sm),
                           updates=tuple((Version(u), d) for u, d in updates),
                           toolkit_driver_for=lambda patch, u=updates: ([d for x, d in u if patch and Version(x) <= patch]
                                                                        or ["580.65.06"])[-1])


def _matrix(builds=(), cuda=(), images=(), gpus=(), checked=None):
    rels = tuple(cuda)

    def cuda_release(v):
        v = Version(str(v))
        return next((r for r in rels if (r.version.major, r.version.minor) == (v.major, v.minor)), None)

    return SimpleNamespace(builds=tuple(builds), cuda=rels, images=tuple(images), gpus=tuple(gpus), gpus_checked=checked,
                           cuda_release=cuda_release)


SM13 = ["7.5", "8.0", "8.6", "9.0", "10.0", "12.0"]
SM12 = ["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"]
MATRIX = _matrix(
    builds=[_build("torch", "2.8.0", "cu128", "12.8", "9.7.1.26", ["5.0", "7.5", "8.0", "9.0"], ["9.0"], ["9.0"], []),
            _build("torch", "2.8.0", "cu126", "12.6", "9.5.1.17", ["5.0", "8.0"], []),
            _build("torch", "2.8.0", "cpu"),
            _build("jax", "0.12.0", "cuda12", "12.1", "9.1", ["8.0", "9.0"], []),
            _build("jax", "0.12.0", "cuda13", "13.0", "9.8", ["8.0", "9.0", "10.0"], ["10.0"]),
            _build("onnxruntime", "1.31.0", "cuda13", "13.0", "9.8", ["7.5", "8.0"], ["8.0"]),
            _build("tensorflow", "2.21.0", "gpu", "12.5", "9.3", ["6.0", "8.0"], ["9.0"])],
    cuda=[_release("12.6", SM12), _release("12.8", SM12 + ["10.0", "12.0"]), _release("13.0", SM13)])

X86, ARM = "manylinux_2_28_x86_64", "manylinux_2_28_aarch64"
TORCH_13 = ["filelock", "cuda-toolkit[cudart,cublas]==13.0.2; platform_system == 'Linux'",
            "nvidia-cudnn-cu13==9.13.0.50; platform_system == 'Linux'"]


def _scenario() -> Index:
    ix = Index()
    for plat in (X86, ARM):
        for py in ("cp311", "cp312", "cp313", "cp313t"):
            ix.add("torch", f"torch-2.9.0-{py.rstrip('t')}-{py}-{plat}.whl", TORCH_13, requires_python=">=3.10",
                   upload="2026-10-15T09:00:00Z" if py == "cp312" else "2026-10-16T09:00:00Z")
    ix.add("torch", f"torch-2.9.0rc1-cp312-cp312-{X86}.whl", TORCH_13)  # a pre-release is no release
    ix.add("torch", f"torch-3.0.0-cp312-cp312-{X86}.whl", TORCH_13, yanked=True)  # a yanked file neither
    ix.add("torch", f"torch-2.10.0-cp312-cp312-macosx_14_0_arm64.whl", TORCH_13)  # no Linux x86_64 wheel
    ix.add("torch", f"evil-9.9.9-cp312-cp312-{X86}.whl", TORCH_13)  # another project's file on the page
    ix.add("torch", f"torch-2.8.0-cp312-cp312-{X86}.whl", TORCH_13)  # in the matrix already
    ix.add("torchvision", f"torchvision-0.24.0-py3-none-{X86}.whl", ["numpy", "torch==2.9.0"], requires_python=">=3.12")
    ix.add("torchvision", f"torchvision-0.24.0-py3-none-{ARM}.whl", ["numpy", "torch==2.9.0"], requires_python=">=3.12")
    ix.add("torchvision", f"torchvision-0.23.0-py3-none-{X86}.whl", ["torch==2.8.0"])
    # PyTorch's own index: a CUDA 12.6 build, the CUDA 13.0 build again (the PyPI one), a CPU build.
    cu126 = ["nvidia-cuda-runtime-cu12==12.6.77; platform_system == 'Linux'", "nvidia-cudnn-cu12==9.5.1.17"]
    ix.add("torch", f"torch-2.9.0+cu126-cp312-cp312-{X86}.whl", cu126, index=TORCH)
    ix.add("torch", f"torch-2.9.0+cu126-cp312-cp312-{ARM}.whl", ["filelock"], index=TORCH)  # a CPU build on arm64
    ix.add("torch", f"torch-2.9.0+cu130-cp312-cp312-{X86}.whl", TORCH_13, index=TORCH)
    ix.add("torch", f"torch-2.9.0+cpu-cp311-cp311-{X86}.whl", ["filelock"], index=TORCH)
    ix.add("torch", f"torch-2.9.0+cu125-cp312-cp312-{ARM}.whl", cu126, index=TORCH)  # no Linux x86_64 build: no row
    ix.add("torch", f"torch-2.9.0+cu129-cp313-cp313t-{X86}.whl", cu126, index=TORCH)  # free-threaded only: skipped
    ix.add("torch", f"torch-2.9.0+cu132-cp312-cp312-{X86}.whl", ["cuda-toolkit==13.2.0", "nvidia-cudnn-cu13==9.15.0.1"],
           index=TORCH)
    ix.add("torch", f"torch-2.8.5-cp312-cp312-macosx_14_0_arm64.whl", TORCH_13)  # no Linux x86_64 wheel
    ix.add("torch", f"torch-2.9.0+cpu-cp312-cp312-{X86}.whl", ["filelock"], index=TORCH)
    for local in ("cu126", "cpu", "cu129", "cu132"):
        ix.add("torchvision", f"torchvision-0.24.0+{local}-cp312-cp312-{X86}.whl", ["torch==2.9.0"], index=f"{TORCH}/{local}")
    # jax: the pure-Python jax names its CUDA extras; jaxlib and the CUDA 13 plugin have wheels, the 12 one is missing.
    ix.add("jax", "jax-0.13.0-py3-none-any.whl", ['jaxlib==0.13.0', 'jax-cuda13-plugin[with-cuda]==0.13.0; extra == "cuda13"',
                                                   'jax-cuda12-plugin[with-cuda]==0.13.0; extra == "cuda12"'],
           requires_python=">=3.11", page_rp=">=3.11")
    for plat in (X86, ARM):
        for py in ("cp311", "cp312", "cp313"):
            ix.add("jaxlib", f"jaxlib-0.13.0-{py}-{py}-{plat}.whl")
    for py in ("cp312", "cp313"):
        ix.add("jax-cuda13-plugin", f"jax_cuda13_plugin-0.13.0-{py}-{py}-{X86}.whl",
               ['nvidia-cuda-runtime~=13.0; extra == "with-cuda"', 'nvidia-cudnn-cu13>=9.8,<10; extra == "with-cuda"'])
    # onnxruntime-gpu: CUDA and cuDNN majors in its extras; tensorflow: lower bounds in [and-cuda].
    ort = ['nvidia-cuda-runtime~=13.0; extra == "cuda"', 'nvidia-cudnn-cu13~=9.0; extra == "cudnn"', "numpy"]
    for py in ("cp311", "cp312"):
        ix.add("onnxruntime-gpu", f"onnxruntime_gpu-1.32.0-{py}-{py}-{X86}.whl", ort, upload="2026-09-01T00:00:00Z")
    ix.add("onnxruntime-gpu", f"onnxruntime_gpu-1.32.0-cp312-cp312-{ARM}.whl", ["numpy"])  # no CUDA on arm64
    tf = ['nvidia-cuda-runtime-cu12<13.0,>=12.5.82; extra == "and-cuda"', 'nvidia-cudnn-cu12<10.0,>=9.3.0.75; extra == "and-cuda"']
    for py in ("cp310", "cp311", "cp312"):
        ix.add("tensorflow", f"tensorflow-2.22.0-{py}-{py}-{X86}.whl", tf)
    ix.add("tensorflow", f"tensorflow-2.23.0-cp312-cp312-{X86}.whl", ["numpy"])  # no [and-cuda] CUDA: skipped
    return ix


def _settings(**kw) -> "U.Settings":
    return U.Settings(**{"index": PYPI, "torch_index": TORCH, "workers": 1, "cuda": False, **kw})


def _golden(name: str, doc) -> None:
    text = json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n"
    path = GOLDEN / name
    if os.environ.get("ENVMAN_REGEN_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.read_text() == text, f"{name} differs from its golden file (ENVMAN_REGEN_GOLDEN=1 rewrites it)"


def _result_doc(result: "U.Result") -> dict:
    return {"new_releases": result.new_releases, "skipped": result.skipped, "warnings": result.warnings,
            "unfilled": result.unfilled,
            "rows": [{"framework": r.framework, "name": r.name, "key": list(r.key), "unconfirmed": list(r.unconfirmed),
                      "data": r.data} for r in result.rows]}


def test_every_framework_s_rows_from_one_index_are_exactly_the_reviewed_ones(monkeypatch):
    _scenario().install(monkeypatch)
    http = Http(timeout=1, retries=0)
    result = R.find_updates(http, _settings(), MATRIX)
    _golden("rows.json", _result_doc(result))


def test_a_tensorflow_release_whose_and_cuda_extra_states_no_cuda_gets_no_gpu_row(monkeypatch):
    """An earlier GPU row must not lend its CUDA to a release that installs none (as the first
    CUDA 13 release must not get the previous row's CUDA 12)."""
    ix = Index()
    ix.add("tensorflow", f"tensorflow-2.23.0-cp312-cp312-{X86}.whl", ["numpy", 'ml-dtypes; extra == "and-cuda"'])
    ix.install(monkeypatch)
    result = R.find_updates(Http(), _settings(frameworks=("tensorflow",)), MATRIX)
    assert result.rows == [] and result.skipped == ["tensorflow 2.23.0: the wheel's [and-cuda] extra states no CUDA"]


# --------------------------------------------------------------------------- the decisions, one by one

PIN = U.Pin


@pytest.mark.parametrize("pin,cudnn,major,prev,cuda,how,inherited", [
    (PIN("13.0", "pinned", "r"), None, 13, ("12.8", "9.7"), "13.0", "pinned by Requires-Dist 'r'", False),
    (PIN("12.5", "at least", "r"), None, 12, ("12.8", "9.7"), "12.5", "at least by Requires-Dist 'r'", False),
    (PIN("13", "major", "r"), None, 13, ("13.2", "9.8"), "13.2", "minor not stated (major by Requires-Dist 'r'); inherited", True),
    (PIN("13", "major", "r"), None, 13, ("12.8", "9.7"), "13.0", "CUDA 13 minor not stated; lowest assumed", True),
    (None, None, 13, ("12.8", "9.7"), "13.0", "CUDA 13 minor not stated; lowest assumed", True),
    (None, None, None, ("12.8", "9.7"), "12.8", "not stated by the wheel; inherited", True),
    (None, None, 12, ("12.8", "9.7"), "12.8", "not stated by the wheel; inherited", True),
    (None, None, None, None, None, None, False),
    (None, None, None, (None, None), None, None, False),
    (None, None, 12, None, "12.0", "CUDA 12 minor not stated; lowest assumed", True),
])
def test_the_cuda_a_row_states_and_how(pin, cudnn, major, prev, cuda, how, inherited):
    from envman.matrix.wheels import CudaPins

    row = None if prev is None else _build("torch", "2.8.0", "cu128", prev[0], prev[1])
    b = U.RowBuilder("torch", Version("2.9.0"), "v")
    b.cuda(CudaPins(pin, cudnn, major), SimpleNamespace(url="https://i.example/w.whl"), row)
    assert b.data.get("cuda") == cuda
    if cuda is None:
        assert "cudnn" not in b.data and not b.unconfirmed and not b.notes
        return
    assert ("cuda" in b.unconfirmed) == inherited
    if inherited:
        src = " from torch-2.8.0 cu128" if how.endswith("inherited") else ""
        assert b.notes[0] == f"cuda {how}{src}" and "cuda" not in b.derived
    else:
        assert b.derived["cuda"] == f"{how} (https://i.example/w.whl)" and b.sources == ["https://i.example/w.whl"]
    # cuDNN: the wheel's, else the earlier row's when the row has a CUDA
    if row is not None and row.cudnn:
        assert b.data["cudnn"] == row.cudnn and "cudnn" in b.unconfirmed
        assert b.notes[-1] == "cudnn not stated by the wheel; inherited from torch-2.8.0 cu128"


def test_a_stated_cudnn_is_a_fact_and_wins():
    from envman.matrix.wheels import CudaPins

    b = U.RowBuilder("torch", Version("2.9.0"), "v")
    b.cuda(CudaPins(PIN("13.0", "pinned", "a"), PIN("9.13", "at least", "c"), 13), SimpleNamespace(url="u"),
           _build("torch", "2.8.0", "x", "13.0", "9.1"))
    assert (b.data["cudnn"], b.derived["cudnn"], b.unconfirmed) == ("9.13", "at least by Requires-Dist 'c' (u)", [])
    assert b.sources == ["u"]


@pytest.mark.parametrize("prev,cuda,sass,ptx,arm", [
    (_build("t", "1", "v", "12.8", None, ["5.0", "8.0", "12.0"], ["12.0"], ["8.0", "12.0"], ["12.0"]), "13.0",
     ["8.0", "12.0"], ["12.0"], (["8.0", "12.0"], ["12.0"])),
    (_build("t", "1", "v", "12.8", None, ["5.0", "8.0"], ["5.0"]), "12.6", ["5.0", "8.0"], ["5.0"], None),
    (_build("t", "1", "v", "12.8", None, ["5.0", "8.0"], ["5.0"], ["5.0"], None), "14.0", ["5.0", "8.0"], ["5.0"], (["5.0"], [])),
    (None, "13.0", [], [], None),
    # arm64 lists lose what this CUDA cannot build too (sm_50 is not in CUDA 13.0's list)
    (_build("t", "1", "v", "12.8", None, ["5.0", "8.0"], ["5.0"], ["5.0", "8.0"], ["5.0", "12.0"]), "13.0",
     ["8.0"], [], (["8.0"], ["12.0"])),
    # a CUDA release without a list of architectures keeps every inherited one, arm64's too
    (_build("t", "1", "v", "12.8", None, ["5.0"], ["5.0"], ["5.0"], ["5.0"]), "14.0", ["5.0"], ["5.0"], (["5.0"], ["5.0"])),
])
def test_inherited_architectures_keep_only_what_this_cuda_builds(prev, cuda, sass, ptx, arm):
    b = U.RowBuilder("t", Version("2"), "v")
    b.data["cuda"] = cuda
    b.data["platforms"] = ["linux/amd64", "linux/arm64"]
    b.arch(prev, MATRIX)
    row = b.build().data
    assert (row["sass"], row["ptx"], row["arch_status"]) == (sass, ptx, "unconfirmed")
    assert (row.get("sass_arm64"), row.get("ptx_arm64")) == (arm or (None, None))
    assert b.unconfirmed == ["sass", "ptx"]
    assert b.notes[-1] == "sass/ptx are not in index metadata; inherited" + (
        f" from t-1 v" if prev else " (none known)")


def test_a_cpu_row_has_no_gpu_code_and_arm64_lists_only_with_arm64_wheels():
    b = U.RowBuilder("t", Version("2"), "cpu")
    b.arch(_build("t", "1", "v", None, None, ["8.0"], [], ["8.0"], []), MATRIX)
    assert (b.data["arch_status"], b.unconfirmed) == ("confirmed", [])
    gpu = U.RowBuilder("t", Version("2"), "v")
    gpu.data.update(cuda="13.0", platforms=["linux/amd64"])
    gpu.arch(_build("t", "1", "v", "13.0", None, ["8.0"], [], ["9.0"], []), MATRIX)
    assert "sass_arm64" not in gpu.build().data


def test_a_row_s_status_order_note_and_derived_facts():
    b = U.RowBuilder("torch", Version("2.9.0"), "cu130")
    b.fact("python", ["3.12"], "u1", "how")
    b.data.update(packages=["torch==2.9.0"], index_url="", released=None, platforms=["linux/amd64"], system_cuda=False)
    b.fact("cuda", "13.0", "u2", "pinned")
    b.fact("cudnn", "9", "u1", "pinned")
    b.unconfirmed += ["sass", "ptx"]
    b.data.update(sass=[], ptx=[])
    row = b.build()
    assert list(row.data) == ["version", "variant", "cuda", "cudnn", "python", "packages", "system_cuda", "sass", "ptx",
                              "platforms", "source", "status", "note", "derived"]
    assert (row.data["status"], row.data["note"], row.data["source"]) == ("confirmed", "Derived by envman matrix update.",
                                                                          ["u1", "u2"])
    assert row.unconfirmed == ("sass", "ptx") and row.name == "torch-2.9.0-cuda13.0" and row.key == ("torch", "2.9.0", "cu130")
    b.inherit("cudnn", "9", None, "guessed")
    b.wheel_python = {"torch": {"3.13", "3.9", "3.12"}}
    again = b.build(note="first")
    assert again.data["status"] == "partially confirmed" and again.data["note"] == "first; cudnn guessed"
    assert again.data["wheel_python"] == {"torch": ["3.9", "3.12", "3.13"]} and again.unconfirmed == ("sass", "ptx", "cudnn")
    assert U.NewRow("jax", {"version": "1", "variant": "cpu"}, ()).name == "jax-1-cpu"


@pytest.mark.parametrize("pin,major,variant", [(PIN("13.0", "pinned", "r"), 13, "cu130"), (PIN("12.10", "at least", "r"), 12, "cu1210"),
                                               (PIN("13", "major", "r"), 13, "cuda13"), (None, 12, "cuda12"), (None, None, "cpu")])
def test_the_variant_a_pin_names(pin, major, variant):
    from envman.matrix.wheels import CudaPins

    assert U._variant_for(CudaPins(pin, None, major)) == variant


@pytest.mark.parametrize("since,available,new", [
    ({}, ["2.7.0", "2.8.0", "2.8.1", "2.9.0"], ["2.8.1", "2.9.0"]),
    ({"torch": "2.6.0"}, ["2.7.0", "2.8.0", "2.9.0"], ["2.7.0", "2.9.0"]),
    ({"torch": "2.9.0"}, ["2.9.0"], []),
])
def test_which_releases_are_new(since, available, new):
    ctx = SimpleNamespace(matrix=MATRIX, settings=SimpleNamespace(since={k: Version(v) for k, v in since.items()}))
    assert [str(v) for v in U._newer(ctx, "torch", [Version(v) for v in available])] == new
    assert [str(v) for v in U._newer(ctx, "mxnet", [Version("1.0")])] == ["1.0"]  # no row yet: every release


def _wheel(filename, rp=None):
    from envman.matrix.wheels import wheel_tags

    return U.Wheel(IndexFile(filename, "u/" + filename), wheel_tags(filename, rp))


def test_the_representative_wheel_of_a_platform():
    ws = [_wheel(f"t-1-cp311-cp311-{X86}.whl"), _wheel(f"t-1-cp313-cp313-{X86}.whl"), _wheel(f"t-1-cp312-cp312-{X86}.whl"),
          _wheel(f"t-1-cp313-cp313-{ARM}.whl"), _wheel("t-1-py3-none-any.whl")]
    assert U.representative(ws, "linux/amd64").file.filename == f"t-1-cp313-cp313-{X86}.whl"
    assert U.representative(ws, "linux/arm64").file.filename == f"t-1-cp313-cp313-{ARM}.whl"
    assert U.representative(ws[4:], "linux/arm64").file.filename == "t-1-py3-none-any.whl"
    assert U.representative(ws[:3], "linux/arm64") is None
    abi3 = [_wheel(f"t-1-cp313-cp313-{X86}.whl"), _wheel(f"t-1-cp313-abi3-{X86}.whl")]  # abi3: 3.13 and later
    assert U.representative(abi3, "linux/amd64").file.filename == f"t-1-cp313-abi3-{X86}.whl"
    tie = [_wheel("t-1-cp313-cp313-manylinux_2_17_x86_64.whl"), _wheel(f"t-1-cp313-cp313-{X86}.whl")]
    assert U.representative(tie, "linux/amd64").file.filename == f"t-1-cp313-cp313-{X86}.whl"
    assert U.representative(tie[::-1], "linux/amd64").file.filename == f"t-1-cp313-cp313-{X86}.whl"
    threaded = [_wheel(f"t-1-cp313-cp313t-{X86}.whl"), _wheel(f"t-1-cp311-cp311-{X86}.whl")]
    assert U.representative(threaded, "linux/amd64").file.filename == f"t-1-cp311-cp311-{X86}.whl"


def test_pythons_and_free_threaded_builds_per_platform():
    ws = [_wheel(f"t-1-cp312-cp312-{X86}.whl"), _wheel(f"t-1-cp313-cp313-{X86}.whl"), _wheel(f"t-1-cp313-cp313t-{X86}.whl"),
          _wheel(f"t-1-cp312-cp312-{ARM}.whl")]
    assert U.pythons(ws, "linux/amd64") == {"3.12", "3.13"}
    assert U.pythons(ws, ["linux/amd64", "linux/arm64"]) == {"3.12"}
    assert U.pythons(ws, []) == set()
    assert U.free_threaded(ws, "linux/amd64") == {"3.13"} and U.free_threaded(ws, ["linux/amd64", "linux/arm64"]) == set()
    assert U.free_threaded([_wheel(f"t-1-py3-none-{X86}.whl", ">=3.13,<3.15")], "linux/amd64") == {"3.13", "3.14"}
    assert U.platforms(ws) == ("linux/amd64", "linux/arm64")
    assert U._machine("linux/arm64") == "aarch64" and U._machine("linux/amd64") == "x86_64"


def test_releases_leave_out_pre_and_dev_releases_and_take_requires_python_from_metadata():
    ws = [_wheel(f"t-1.0-cp312-cp312-{X86}.whl"), _wheel(f"t-1.1rc1-cp312-cp312-{X86}.whl"), _wheel(f"t-1.1.dev3-py3-none-any.whl")]
    assert list(U.releases(ws)) == [Version("1.0")]
    py3 = [_wheel(f"t-1-py3-none-{X86}.whl")]
    assert U.pythons(U.with_requires_python(py3, ">=3.14"), "linux/amd64") == {"3.14", "3.15"}
    assert U.with_requires_python(py3, None) == py3
    page = [U.Wheel(IndexFile(f"t-1-py3-none-{X86}.whl", "u", requires_python=">=3.13"), py3[0].tags)]
    assert U.pythons(U.with_requires_python(page, ">=3.10"), "linux/amd64") == {"3.13", "3.14", "3.15"}
    assert U.final_version("1.0") == Version("1.0") and U.final_version("1.0rc1") is None
    assert U.final_version("x") is None and U.final_version("1.0.dev1") is None


@pytest.mark.parametrize("tv,series", [("0.15.0", (2, 0)), ("0.24.1", (2, 9)), ("0.14.0", (-1, -1)), ("1.15.0", (-1, -1))])
def test_the_torch_series_of_a_torchvision(tv, series):
    assert U._tv_series(Version(tv)) == series


@pytest.mark.parametrize("spec,same", [("==2.9.0", True), (">=2.9.0", True), ("~=2.9.0", True), ("===2.9.0", True),
                                       ("==2.9.*", True), (">=2.8.0", False), ("<=2.9.0", False), ("==2.9.0,>=2.8", True)])
def test_a_torchvision_belongs_to_the_torch_series_its_lower_bound_names(spec, same):
    from packaging.specifiers import SpecifierSet

    assert U._same_series(SpecifierSet(spec), Version("2.9.1")) is same


@pytest.mark.parametrize("upload,day", [("2026-10-15T09:00:00Z", "2026-10-15"), ("2026-10-15T23:30:00-05:00", "2026-10-15"),
                                        ("", None), (None, None), ("yesterday", None)])
def test_release_days(upload, day):
    assert U.upload_day(upload) == day


def test_a_release_is_dated_by_its_first_upload():
    ws = [U.Wheel(IndexFile("a", "a", upload_time=t), None) for t in ("2026-03-02T00:00:00Z", None, "2026-02-27T00:00:00Z")]
    assert U.released(ws) == "2026-02-27" and U.released(ws[1:2]) is None


# --------------------------------------------------------------------------- CUDA releases and the GPU list


def test_cuda_releases_on_the_index_are_x_y_z_finals_dated_by_their_first_upload(monkeypatch):
    ix = Index()
    for name, up in (("13.0.2", "2026-03-02T00:00:00Z"), ("13.0.2.1", "2026-02-01T00:00:00Z"), ("13.0.2", None),
                     ("13.1.0rc1", "2026-01-01T00:00:00Z"), ("13.1", "2026-01-01T00:00:00Z"), ("13.1.0", None),
                     ("13.1.0", "2026-04-01T00:00:00Z"), ("13.1.0", "2026-05-01T00:00:00Z")):
        ix.add("cuda-toolkit", f"cuda_toolkit-{name}-py2.py3-none-any.whl", upload=up)
    ix.add("cuda-toolkit", "cuda_toolkit.whl")  # no version in the name
    ix.install(monkeypatch)
    ctx = U.IndexReader(Http(), _settings(), MATRIX, lambda s: None)
    assert G.cuda_versions(ctx) == {Version("13.0.2"): "2026-02-01", Version("13.1.0"): "2026-04-01"}


def _rel(version, updates=(), toolkit="580.65.06"):
    from envman.matrix.model import DriverVersion

    v = Version(version)
    ups = tuple((Version(u), DriverVersion.parse(d)) for u, d in updates)
    return SimpleNamespace(version=v, key=f"{v.major}.{v.minor}", updates=ups, sm=(),
                           toolkit_driver_for=lambda p: ([d for u, d in ups if p is not None and u <= p]
                                                         or [DriverVersion.parse(toolkit)])[-1])


def test_what_the_cuda_report_asks_for_and_never_guesses():
    m = _matrix(cuda=[_rel("13.0", [("13.0.2", "580.82.07")])],
                images=[SimpleNamespace(cuda_patch=Version("13.0.2"), custom=False),
                        SimpleNamespace(cuda_patch=Version("13.0.3"), custom=True)])
    V = Version
    new, unfilled = G.cuda_report(m, {V("13.0.0"): "2025-08-01", V("13.0.1"): None, V("13.0.2"): "2025-10-01",
                                      V("13.0.3"): None, V("14.1.0"): "2027-01-01"})
    assert new == ["14.1.0"]
    assert unfilled == [
        "CUDA 13.0.1: no toolkit driver recorded for this update (updates of cuda.toml 13.0); stacks on its images use "
        "580.65.06, a lower bound",
        "CUDA 13.0.3: no toolkit driver recorded for this update (updates of cuda.toml 13.0); stacks on its images use "
        "580.82.07, a lower bound",
        "CUDA 13.0.3: no nvidia/cuda image row (images.toml) of this release, the newest of 13.0",
        "CUDA 14.1.0 (released 2027-01-01): no [[release]] 14.1 in cuda.toml: its toolkit driver (NVIDIA's release notes, "
        "Table 3), nvcc's compute capabilities and images are not known"]
    # the first patch on the index is the GA when no update is recorded below it; the newest has its image
    assert G.cuda_report(m, {V("13.0.1"): None, V("13.0.2"): None}) == ([], [])
    only = _matrix(cuda=[_rel("13.0")], images=[SimpleNamespace(cuda_patch=Version("13.0.0"), custom=False)])
    assert G.cuda_report(only, {V("13.0.0"): None}) == ([], [])


@pytest.mark.parametrize("days,stale", [(0, False), (180, False), (181, True)])
def test_the_gpu_list_is_stale_after_180_days(days, stale):
    import datetime as dt

    gpus = [SimpleNamespace(cc=Arch(9, 0)), SimpleNamespace(cc=Arch(12, 0))]
    m = _matrix(cuda=[_release("13.0", ["9.0", "12.0"]), _release("12.8", ["12.1"])], gpus=gpus, checked="2026-01-01")
    age, why = G.gpu_list_age(m, dt.date(2026, 1, 1) + dt.timedelta(days=days))
    assert age == days
    assert why == ([f"the GPU list was compared with NVIDIA's CUDA GPUs pages {days} days ago (2026-01-01)"] if stale else [])
    newer = _matrix(cuda=[_release("13.0", ["9.0", "12.0", "12.1", "13.0"])], gpus=gpus, checked="2026-01-01")
    assert G.gpu_list_age(newer, dt.date(2026, 1, 2)) == (1, [
        "CUDA 13.0 targets compute capability 12.1, 13.0, above every GPU of the list (the newest: 12.0)"])
    empty = _matrix(cuda=[_release("13.0", ["9.0"])], checked=None)
    assert G.gpu_list_age(empty, dt.date(2026, 1, 2)) == (None, [
        "the GPU list records no date it was compared with NVIDIA's CUDA GPUs pages (checked)",
        "CUDA 13.0 targets compute capability 9.0, above every GPU of the list (the newest: None)"])
    assert G.gpu_list_age(_matrix(checked="2026-01-01"), dt.date(2026, 1, 2)) == (1, [])


# --------------------------------------------------------------------------- the runs: find_updates and check_only


def test_check_only_names_new_releases_without_reading_metadata(monkeypatch):
    ix = _scenario()
    ix.add("cuda-toolkit", "cuda_toolkit-14.0.0-py3-none-any.whl")
    ix.install(monkeypatch)
    monkeypatch.setattr(U, "read_wheel_metadata", lambda http, f: pytest.fail("metadata read"))
    m = _matrix(builds=MATRIX.builds, cuda=MATRIX.cuda, checked="2026-01-01", gpus=[SimpleNamespace(cc=Arch(12, 0))])
    out = R.check_only(Http(), _settings(cuda=True), m)
    assert out["cuda"] == ["14.0.0"] and out["gpus"][0].startswith("the GPU list was compared")
    assert {k: v for k, v in out.items() if k not in ("cuda", "gpus")} == {
        "torch": ["2.8.5", "2.9.0", "2.10.0"], "jax": ["0.13.0"], "onnxruntime": ["1.32.0"], "tensorflow": ["2.22.0", "2.23.0"]}
    assert R.check_only(Http(), _settings(cuda=False, frameworks=("jax",)), m) == {"jax": ["0.13.0"]}
    fresh = _matrix(builds=MATRIX.builds, cuda=[_release("14.0", ["9.0"])], checked="2999-01-01",
                    gpus=[SimpleNamespace(cc=Arch(12, 0))])
    assert "gpus" not in R.check_only(Http(), _settings(cuda=True, frameworks=()), fresh)


def test_an_index_without_cuda_toolkit_is_a_warning_and_cuda_is_not_checked(monkeypatch):
    Index().install(monkeypatch)
    result = R.find_updates(Http(), _settings(cuda=True, frameworks=()), MATRIX)
    assert result.warnings == ["the index has no cuda-toolkit project: CUDA releases were not checked"]
    assert result.new_releases == {} and result.unfilled == []
    assert R.check_only(Http(), _settings(cuda=True, frameworks=()), _matrix(checked="2999-01-01")) == {}


def test_find_updates_reports_the_cuda_releases_and_what_it_could_not_fill(monkeypatch):
    ix = Index()
    ix.add("cuda-toolkit", "cuda_toolkit-14.0.0-py3-none-any.whl", upload="2027-02-03T00:00:00Z").install(monkeypatch)
    result = R.find_updates(Http(), _settings(cuda=True, frameworks=()), MATRIX)
    assert result.new_releases == {"cuda": ["14.0.0"]} and result.unfilled[0].startswith("CUDA 14.0.0 (released 2027-02-03)")
    ix.pages.clear()
    ix.add("cuda-toolkit", "cuda_toolkit-13.0.0-py3-none-any.whl")
    result = R.find_updates(Http(), _settings(cuda=True, frameworks=()), MATRIX)
    assert "cuda" not in result.new_releases


def test_a_page_that_cannot_be_used_stops_the_run_and_says_nothing_was_written(monkeypatch):
    from envman.errors import EnvmanError
    from envman.matrix.index import IndexFileError

    def broken(http, index, project):
        raise IndexFileError("not a PEP 691 project page (no files list)", where=project_url(index, project), fix="point it")

    monkeypatch.setattr(U, "fetch_project", broken)
    with pytest.raises(EnvmanError) as e:
        R.find_updates(Http(), _settings(frameworks=("jax",)), MATRIX)
    assert type(e.value) is EnvmanError
    assert (e.value.what, e.value.where, e.value.fix) == ("not a PEP 691 project page (no files list)",
                                                          f"{PYPI}/jax/", "point it; nothing was written")


@pytest.mark.parametrize("required", [False, True])
def test_an_unreachable_variant_index_is_a_warning_unless_named(monkeypatch, required):
    from envman.matrix.index import IndexUnreachable

    ix = _scenario().install(monkeypatch)
    real = U.fetch_project

    def fetch(http, index, project):
        if index.startswith(TORCH):
            raise IndexUnreachable("connection refused", where=project_url(index, project))
        return real(http, index, project)

    monkeypatch.setattr(U, "fetch_project", fetch)
    settings = _settings(frameworks=("torch",), torch_index_required=required)
    if required:
        with pytest.raises(IndexUnreachable):
            R.find_updates(Http(), settings, MATRIX)
        return
    result = R.find_updates(Http(), settings, MATRIX)
    assert [r.key for r in result.rows] == [("torch", "2.9.0", "cu130")]
    assert result.warnings == ["PyTorch's variant index was not read, only the PyPI build of each release is derived: "
                               f"{TORCH}/torch/: connection refused (--torch-index URL names a mirror)"]
    assert ix.fetched  # the default index was read


def test_without_a_variant_index_only_the_pypi_build_is_derived(monkeypatch):
    ix = _scenario().install(monkeypatch)
    result = R.find_updates(Http(), _settings(frameworks=("torch",), torch_index=None), MATRIX)
    assert [r.key for r in result.rows] == [("torch", "2.9.0", "cu130")]
    assert not any(i.startswith(TORCH) for i, _ in ix.fetched)


def test_progress_names_each_page_and_metadata_read_once(monkeypatch):
    _scenario().install(monkeypatch)
    said: list[str] = []
    R.find_updates(Http(), _settings(frameworks=("onnxruntime",)), MATRIX, said.append)
    assert said[0] == f"reading {PYPI}/onnxruntime-gpu/"
    assert said.count(f"metadata of onnxruntime_gpu-1.32.0-cp312-cp312-{X86}.whl") == 1
    assert all(s.startswith(("reading ", "metadata of ")) for s in said)


# --------------------------------------------------------------------------- what is checked and written


def _new_row(version="9.9.9", python=("3.12",), framework="jax", variant="cuda13", **extra):
    data = {"version": version, "variant": variant, "cuda": "13.0", "python": list(python),
            "packages": [f"jax[cuda13]=={version}"], "sass": ["9.0"], "ptx": [], "source": ["https://x.example/"],
            "status": "confirmed", "note": "n", "derived": {"cuda": "pinned (https://x.example/)"}, **extra}
    return U.NewRow(framework, data, ())


def _shipped():
    from envman.matrix.source import MatrixSource

    return list(MatrixSource().shipped_files)


def test_check_rows_keeps_what_validates_and_renders_and_says_why_the_others_fail(tmp_path):
    from envman.errors import UserError

    good, bad = _new_row("9.9.9"), _new_row("9.9.8", sass=["9.5"])
    broken = _new_row("9.9.7")
    rendered = []

    def render(stack):
        rendered.append(stack.name)
        if "9.9.7" in stack.name:
            raise UserError("cannot render", where="render")

    overlay = tmp_path / "o.toml"
    ok, why = S.check_rows([good, bad, broken], _shipped(), S.plan_overlay([good, bad, broken], overlay), render)
    assert ok == [good]
    assert why[0].startswith("jax-9.9.8-cuda13.0 (cuda13): SASS sm_95 cannot be built by CUDA 13.0")
    assert why[1] == "jax-9.9.7-cuda13.0 (cuda13): render: cannot render"
    assert len(why) == 2 and any("9.9.9" in n for n in rendered)
    assert not overlay.exists()  # checked from a temporary copy


def test_a_row_that_does_not_load_as_itself_is_refused(tmp_path):
    row = _new_row("9.9.9")
    ok, why = S.check_rows([row], _shipped(), {tmp_path / "o.toml": "schema = 1\nkind = \"framework\"\n"}, lambda s: None)
    assert ok == [] and why == ["jax-9.9.9-cuda13.0 (cuda13): not loaded"]


def test_plan_overlay_replaces_rows_of_the_same_release_and_variant_and_keeps_the_rest(tmp_path):
    from envman.matrix.write import read_overlay

    out = tmp_path / "ours.toml"
    first = S.plan_overlay([_new_row("9.9.8"), _new_row("9.9.9", note="old")], out)
    out.write_text(first[out])
    again = S.plan_overlay([_new_row("9.9.9", note="new"), _new_row("9.9.9", variant="cuda12")], out)
    assert list(again) == [out]
    out.write_text(again[out])
    rows = [(d["version"], d["variant"], d["note"]) for d in read_overlay(out)]
    assert rows == [("9.9.8", "cuda13", "n"), ("9.9.9", "cuda13", "new"), ("9.9.9", "cuda12", "n")]


def test_plan_shipped_appends_to_each_framework_s_file(tmp_path):
    (tmp_path / "jax.toml").write_text("# jax\nschema = 1")
    (tmp_path / "torch.toml").write_text("# torch\n")
    planned = S.plan_shipped([_new_row("9.9.9"), _new_row("9.9.9", framework="torch", variant="cu130")], tmp_path)
    assert sorted(planned) == [tmp_path / "jax.toml", tmp_path / "torch.toml"]
    from envman.matrix.write import build_toml

    assert planned[tmp_path / "jax.toml"] == "# jax\nschema = 1\n\n" + build_toml(_new_row("9.9.9").data)
    assert planned[tmp_path / "torch.toml"].startswith("# torch\n\n[[build]]")
    from envman.errors import UserError

    with pytest.raises(UserError) as e:
        S.plan_shipped([_new_row(framework="tensorflow")], tmp_path)
    assert (e.value.what, e.value.where, e.value.fix) == (
        "the shipped matrix file is missing", str(tmp_path / "tensorflow.toml"), "run --write from a source checkout; nothing was written")


def test_settle_drops_failing_rows_until_the_rest_pass_together(monkeypatch):
    from envman.errors import EnvmanError

    a, b, c = _new_row("1"), _new_row("2"), _new_row("3")
    rounds = []

    def check(rows, files, candidates, render):
        rounds.append([r.data["version"] for r in rows])
        bad = {"1": "one"} if len(rows) == 3 else ({"2": "two"} if len(rows) == 2 else {})
        return [r for r in rows if r.data["version"] not in bad], [f"{v}: {w}" for v, w in bad.items()]

    monkeypatch.setattr(S, "check_rows", check)
    plan = lambda rows: {Path("p"): ",".join(r.data["version"] for r in rows)}  # noqa: E731
    rows, skipped, files = S.settle([a, b, c], [], plan, None)
    assert (rows, skipped, files) == ([c], ["1: one", "2: two"], {Path("p"): "3"}) and rounds == [["1", "2", "3"], ["2", "3"], ["3"]]
    assert S.settle([], [], plan, None) == ([], [], {})
    monkeypatch.setattr(S, "check_rows", lambda rows, *a: ([], [f"{rows[0].data['version']}: x"]))
    assert S.settle([a], [], plan, None) == ([], ["1: x"], {})
    many = [_new_row(str(i)) for i in range(10)]
    monkeypatch.setattr(S, "check_rows", lambda rows, *a: (rows[1:], [rows[0].data["version"]]))
    with pytest.raises(EnvmanError) as e:
        S.settle(many, [], plan, None)
    assert (e.value.what, e.value.where, e.value.fix) == (
        "the derived rows do not settle into a valid matrix", "envman matrix update",
        "run `envman matrix validate`; nothing was written")
    monkeypatch.setattr(S, "check_rows", lambda rows, *a: (rows[1:], [rows[0].data["version"]]))
    assert S.settle(many[:3], [], plan, None)[:2] == ([], ["0", "1", "2"])  # the fourth round finds none left
    with pytest.raises(EnvmanError):
        S.settle(many[:4], [], plan, None)  # four rounds, still failing


def test_the_summary_of_a_run():
    from envman.matrix.backfill import Gap

    gap = Gap("torch", "2.8.0", "cpu", {"python": ["3.12", "3.13"]}, ("Python 3.13",), ("https://pypi.example/simple/torch/",))
    r = U.Result(new_releases={"jax": ["9.9.9"]}, rows=[_new_row("9.9.9"), U.NewRow("jax", _new_row("9.9.8").data, ("cuda",))],
                 skipped=["s"], warnings=["w"], unfilled=["u"], gaps=[gap])
    http = SimpleNamespace(requests=7, bytes_read=1234)
    assert r.summary(http) == {"new_releases": {"jax": ["9.9.9"]}, "unfilled": ["u"],
                               "new_rows": ["jax-9.9.9-cuda13.0 (cuda13)", "jax-9.9.8-cuda13.0 (cuda13)"],
                               "unconfirmed": {"jax-9.9.8-cuda13.0 (cuda13)": ["cuda"]}, "skipped": ["s"], "warnings": ["w"],
                               "backfilled": ["torch 2.8.0 cpu: Python 3.13 (from https://pypi.example/simple/torch/)"],
                               "requests": 7, "bytes": 1234}


TF_PREV = [  # (earlier tensorflow rows, the new wheel's [and-cuda] lines, the CUDA and cuDNN the row states)
    ([("2.20.0", "gpu", "12.1"), ("2.21.0", "legacy", "12.5")], ['nvidia-cudnn-cu12>=9.3; extra == "and-cuda"'], ("12.1", "9.3")),
    ([("2.21.0", "old", "11.8"), ("2.20.0", "legacy", "12.5")], ['nvidia-cudnn-cu12>=9.3; extra == "and-cuda"'], ("12.5", "9.3")),
    ([("2.21.0", "old", "11.8")], ['nvidia-cudnn-cu12>=9.3; extra == "and-cuda"'], ("12.0", "9.3")),
    ([("2.21.0", "gpu", "12.5")], ['nvidia-cuda-runtime-cu12>=12.8.1; extra == "and-cuda"'], ("12.8", "9.1")),
]


@pytest.mark.parametrize("rows,requires,stated", TF_PREV)
def test_a_tensorflow_row_inherits_only_from_a_gpu_row_of_its_cuda_major(monkeypatch, rows, requires, stated):
    m = _matrix(builds=[_build("tensorflow", v, var, cuda, "9.1", ["8.0"], []) for v, var, cuda in rows],
                cuda=MATRIX.cuda)
    Index().add("tensorflow", f"tensorflow-2.22.0-cp312-cp312-{X86}.whl", requires).install(monkeypatch)
    (row,) = R.find_updates(Http(), _settings(frameworks=("tensorflow",)), m).rows
    assert (row.data["cuda"], row.data["cudnn"]) == stated


def test_releases_after_a_skipped_one_are_still_derived_and_arm64_wheels_that_agree_are_platforms(monkeypatch):
    ix = Index()
    tf = ['nvidia-cuda-runtime-cu12>=12.5.82; extra == "and-cuda"']
    ort = ['nvidia-cuda-runtime~=13.0; extra == "cuda"']
    for v, plat, reqs in (("2.22.0", "macosx_14_0_arm64", tf), ("2.22.1", X86, ["numpy"]), ("2.22.2", X86, tf),
                          ("2.22.2", ARM, tf)):
        ix.add("tensorflow", f"tensorflow-{v}-cp312-cp312-{plat}.whl", reqs)
    for v, plat in (("1.32.0", "macosx_14_0_arm64"), ("1.32.1", X86), ("1.32.1", ARM)):
        ix.add("onnxruntime-gpu", f"onnxruntime_gpu-{v}-cp312-cp312-{plat}.whl", ort)
    ix.install(monkeypatch)
    result = R.find_updates(Http(), _settings(frameworks=("tensorflow", "onnxruntime")), MATRIX)
    assert [r.key for r in result.rows] == [("tensorflow", "2.22.2", "gpu"), ("onnxruntime", "1.32.1", "cuda13")]
    assert result.skipped == ["tensorflow 2.22.1: the wheel's [and-cuda] extra states no CUDA",
                              "onnxruntime 1.32.0: no Linux x86_64 onnxruntime-gpu wheel"]
    for row, name in zip(result.rows, ("tensorflow-2.22.2", "onnxruntime_gpu-1.32.1")):
        assert row.data["platforms"] == ["linux/amd64", "linux/arm64"]
        assert row.data["platform_source"] == [f"{PYPI}/f/{name}-cp312-cp312-{ARM}.whl"]


def test_plan_shipped_appends_every_row_of_a_framework_and_names_an_unreadable_file(tmp_path):
    from envman.errors import UserError
    from envman.matrix.write import build_toml

    (tmp_path / "jax.toml").write_text("schema = 1\n")
    rows = [_new_row("9.9.8"), _new_row("9.9.9")]
    assert S.plan_shipped(rows, tmp_path)[tmp_path / "jax.toml"] == (
        "schema = 1\n\n" + build_toml(rows[0].data) + "\n" + build_toml(rows[1].data))
    (tmp_path / "jax.toml").write_bytes(b"\xff\xfes\x00")
    with pytest.raises(UserError) as e:
        S.plan_shipped(rows, tmp_path)
    assert e.value.what == "the shipped matrix file is UTF-16, expected UTF-8 text"


EXTRA_NAMES = st.one_of(st.from_regex(r"cuda[0-9]{1,3}", fullmatch=True), st.sampled_from(
    ["cuda", "cuda-13", "cuda_13", "cuda12-local", "cuda12_pip", "tpu", "k8s", "cuda13x", "CUDA13", "cpu", "xcuda13"]))


@given(st.lists(EXTRA_NAMES, max_size=6))
@settings(max_examples=200, deadline=None)
def test_the_cuda_majors_of_jax_are_its_cudann_extras_only(extras):
    import re

    lines = [f'jax-cuda-plugin; extra == "{e}"' for e in extras] + ["jaxlib==0.13.0", f"x; extra=='{extras[0] if extras else 'a'}'"]
    want = sorted({int(e[4:]) for e in extras if re.fullmatch(r"cuda[0-9]+", e)})
    assert U._cuda_extras(lines) == want


def _jax_index(*, plugin12=True, jaxlib_has_release=True, arm_plugin=False) -> Index:
    ix = Index()
    ix.add("jax", "jax-0.12.9-py3-none-macosx_14_0_arm64.whl")  # no Linux wheel: not derived, not reported
    ix.add("jax", "jax-0.13.0-py3-none-any.whl", ['jax-cuda12-plugin[with-cuda]; extra == "cuda12"',
                                                   'jax-cuda13-plugin[with-cuda]; extra == "cuda13"',
                                                   'jax-cuda13-plugin; extra == "cuda"', 'libtpu; extra == "tpu"'])
    for plat in (X86, ARM):
        ix.add("jaxlib", f"jaxlib-{'0.13.0' if jaxlib_has_release else '0.12.0'}-cp312-cp312-{plat}.whl")
    ix.add("jax-cuda12-plugin", f"jax_cuda12_plugin-{'0.13.0' if plugin12 else '0.12.0'}-cp312-cp312-{X86}.whl",
           ['nvidia-cuda-runtime-cu12>=12.1.105; extra == "with-cuda"'])
    for plat in (X86, ARM) if arm_plugin else (X86,):
        ix.add("jax-cuda13-plugin", f"jax_cuda13_plugin-0.13.0-cp312-cp312-{plat}.whl",
               ['nvidia-cuda-runtime~=13.0; extra == "with-cuda"'])
    return ix


def test_jax_skips_a_plugin_without_the_release_and_goes_on(monkeypatch):
    _jax_index(plugin12=False, arm_plugin=True).install(monkeypatch)
    result = R.find_updates(Http(), _settings(frameworks=("jax",)), MATRIX)
    assert result.new_releases == {"jax": ["0.12.9", "0.13.0"]}
    assert result.skipped == ["jax 0.13.0 cuda12: no Linux x86_64 jax-cuda12-plugin 0.13.0 wheel"]
    (row,) = result.rows
    assert row.key == ("jax", "0.13.0", "cuda13") and row.data["platforms"] == ["linux/amd64", "linux/arm64"]
    assert row.data["platform_source"] == [f"{PYPI}/f/jax_cuda13_plugin-0.13.0-cp312-cp312-{ARM}.whl"]


def test_jax_skips_a_major_without_a_python_every_package_has_and_goes_on(monkeypatch):
    _jax_index(jaxlib_has_release=False).install(monkeypatch)
    result = R.find_updates(Http(), _settings(frameworks=("jax",)), MATRIX)
    assert result.skipped == ["jax 0.13.0 cuda12: no Python version has plugin and jaxlib wheels",
                              "jax 0.13.0 cuda13: no Python version has plugin and jaxlib wheels"]
    assert result.rows == []


JAX_PREV = [  # (earlier jax rows, the CUDA the new cuda13 row states: the plugin gives only the major)
    ([("0.12.0", "cuda13", "13.0"), ("0.12.5", "cuda13-local", "13.2")], "13.0"),
    ([("0.12.0", "gpu13", "13.1"), ("0.12.5", "gpu12", "12.8")], "13.1"),
    ([("0.12.5", "gpu12", "12.8")], "13.0"),
]


@pytest.mark.parametrize("rows,cuda", JAX_PREV)
def test_a_jax_row_inherits_from_its_variant_then_its_cuda_major(monkeypatch, rows, cuda):
    m = _matrix(builds=[_build("jax", v, var, c, "9.1", ["8.0"], []) for v, var, c in rows], cuda=MATRIX.cuda)
    ix = _jax_index()
    ix.pages.pop((PYPI, "jax-cuda12-plugin"))
    ix.install(monkeypatch)
    (row,) = R.find_updates(Http(), _settings(frameworks=("jax",)), m).rows
    assert row.data["cuda"] == cuda


def test_a_jax_release_is_read_from_its_linux_x86_64_wheel_when_it_is_not_pure_python(monkeypatch):
    ix = _jax_index()
    ix.pages[(PYPI, "jax")] = []
    ix.add("jax", f"jax-0.13.0-cp312-cp312-{X86}.whl", ['jax-cuda13-plugin[with-cuda]; extra == "cuda13"'])
    ix.add("jax", f"jax-0.13.1-cp312-cp312-{ARM}.whl", ['jax-cuda13-plugin[with-cuda]; extra == "cuda13"'])
    ix.install(monkeypatch)
    result = R.find_updates(Http(), _settings(frameworks=("jax",)), MATRIX)
    assert [r.key for r in result.rows] == [("jax", "0.13.0", "cuda13")] and result.skipped == []


def _scenario_without_torchvision() -> Index:
    """torch releases no torchvision requires: the row pins torch alone and says so."""
    ix = Index()
    for py in ("cp312", "cp313", "cp313t"):
        ix.add("torch", f"torch-2.9.0-{py.rstrip('t')}-{py}-{X86}.whl", TORCH_13)
    ix.add("torch", f"torch-2.9.0-cp312-cp312-{ARM}.whl", ["nvidia-cuda-runtime-cu12==12.8.90"])  # another build on arm64
    ix.add("torch", f"torch-2.9.1-cp313-cp313t-{X86}.whl", TORCH_13)  # free-threaded only: no regular Python
    ix.add("torchvision", f"torchvision-0.23.0-py3-none-{X86}.whl", ["torch==2.8.0"])
    cu128 = ["nvidia-cuda-runtime-cu12==12.8.90", "nvidia-cudnn-cu12==9.7.1.26"]
    ix.add("torch", f"torch-2.9.0+cu128-cp312-cp312-{X86}.whl", cu128, index=TORCH)
    ix.add("torch", f"torch-2.9.0+cu128-cp313-cp313t-{X86}.whl", cu128, index=TORCH)
    ix.add("torchvision", f"torchvision-0.23.0+cu128-cp312-cp312-{X86}.whl", ["torch==2.8.0"], index=f"{TORCH}/cu128")
    return ix


def test_torch_rows_without_a_torchvision_are_exactly_the_reviewed_ones(monkeypatch):
    _scenario_without_torchvision().install(monkeypatch)
    result = R.find_updates(Http(), _settings(frameworks=("torch",)), MATRIX)
    _golden("rows-without-torchvision.json", _result_doc(result))


ORT = [  # (earlier onnxruntime rows, the wheel's Requires-Dist, the row's variant and CUDA, or the skip)
    ([("1.31.0", "cuda13", "13.0")], ["numpy"], "onnxruntime 1.32.0: its wheels state no CUDA and no earlier row gives one"),
    ([("1.30.0", "cuda12", "12.4"), ("1.31.0", "cuda13", "13.0")], ["numpy"], ("cuda12", "12.4")),
    ([("1.30.0", "cuda12", "12.4"), ("1.31.0", "cuda12x", "12.8")], ['nvidia-cudnn-cu12~=9.0; extra == "cudnn"'], ("cuda12", "12.4")),
    ([("1.30.0", "gpu12", "12.8"), ("1.31.0", "cuda13", "13.0")], ['nvidia-cudnn-cu12~=9.0; extra == "cudnn"'], ("cuda12", "12.8")),
    ([("1.31.0", "cpu", None)], ["numpy"], "onnxruntime 1.32.0: its wheels state no CUDA and no earlier row gives one"),
    ([], ["numpy"], "onnxruntime 1.32.0: its wheels state no CUDA and no earlier row gives one"),
    # a stated major looks for an earlier row of its own variant first, not the CUDA 12 default's
    ([("1.30.0", "cuda13", "13.1"), ("1.31.0", "cuda12", "12.4")], ['nvidia-cuda-runtime~=13.0; extra == "cuda"'], ("cuda13", "13.1")),
    ([("1.30.0", "cuda12", "12.4"), ("1.31.0", "cuda13", "13.1")], ['nvidia-cuda-runtime-cu12~=12.0; extra == "cuda"'],
     ("cuda12", "12.4")),
]


@pytest.mark.parametrize("rows,requires,want", ORT)
def test_the_variant_and_cuda_of_an_onnxruntime_row(monkeypatch, rows, requires, want):
    m = _matrix(builds=[_build("onnxruntime", v, var, c, "9.1", ["8.0"] if c else [], []) for v, var, c in rows],
                cuda=MATRIX.cuda)
    ix = Index()
    ix.add("onnxruntime-gpu", f"onnxruntime_gpu-1.32.0-cp312-cp312-{X86}.whl", requires)
    ix.add("onnxruntime-gpu", f"onnxruntime_gpu-1.33.0-cp312-cp312-{X86}.whl", ['nvidia-cuda-runtime~=13.0; extra == "cuda"'])
    ix.install(monkeypatch)
    result = R.find_updates(Http(), _settings(frameworks=("onnxruntime",)), m)
    first = [r for r in result.rows if r.data["version"] == "1.32.0"]
    if isinstance(want, str):
        assert result.skipped == [want] and not first
    else:
        assert (first[0].data["variant"], first[0].data["cuda"]) == want
    assert any(r.data["version"] == "1.33.0" for r in result.rows)  # the next release is derived either way


def test_more_decisions_at_their_edges(monkeypatch):
    # the newest CUDA first among rows of one release (listed in any order)
    rows = [_build("torch", "2.8.0", "cu126", "12.6"), _build("torch", "2.8.0", "cu128", "12.8")]
    assert U.previous_row(SimpleNamespace(builds=rows), "torch", Version("2.9"), "x", 12).variant == "cu128"
    # a platform wheel of free-threaded builds only loses to a wheel with a regular Python
    ft, pure = _wheel(f"t-1-cp313-cp313t-{X86}.whl"), _wheel("t-1-py3-none-any.whl")
    assert U.representative([ft, pure], "linux/amd64") is pure and U.representative([ft], "linux/amd64") is ft
    # the page's Requires-Python applies to the wheels it lists
    (w,) = U.wheels([IndexFile("t-1-py3-none-any.whl", "u", requires_python=">=3.14")])
    assert w.tags.pythons == ("3.14", "3.15")
    # a row's note: the notes alone, joined
    b = U.RowBuilder("t", Version("1"), "v")
    b.notes += ["a", "b"]
    assert b.build().data["note"] == "a; b"
    # the CUDA report: a release the matrix lacks does not stop the others
    m = _matrix(cuda=[_rel("13.0")], images=[SimpleNamespace(cuda_patch=Version("13.0.1"), custom=False)])
    assert G.cuda_report(m, {Version("12.9.0"): None, Version("13.0.0"): None, Version("13.0.1"): None})[0] == ["12.9.0"]
    assert len(G.cuda_report(m, {Version("12.9.0"): None, Version("13.0.0"): None, Version("13.0.1"): None})[1]) == 2


def test_a_page_error_without_a_fix_still_says_nothing_was_written(monkeypatch):
    from envman.errors import EnvmanError
    from envman.matrix.index import IndexFileError

    def broken(http, index, project):
        raise IndexFileError("no files list", where="w")

    monkeypatch.setattr(U, "fetch_project", broken)
    with pytest.raises(EnvmanError) as e:
        R.find_updates(Http(), _settings(frameworks=("jax",)), MATRIX)
    assert e.value.fix == "nothing was written"


def test_check_rows_goes_on_after_a_row_that_does_not_load(tmp_path):
    missing, good = _new_row("9.9.7"), _new_row("9.9.9")
    text = S.plan_overlay([good], tmp_path / "o.toml")[tmp_path / "o.toml"]
    ok, why = S.check_rows([missing, good], _shipped(), {tmp_path / "o.toml": text}, lambda s: None)
    assert ok == [good] and why == ["jax-9.9.7-cuda13.0 (cuda13): not loaded"]


def test_a_shipped_matrix_file_may_be_large(tmp_path):
    (tmp_path / "jax.toml").write_text("# x\n" * 300_000)  # 1.2 MB, over the limit of small files
    assert len(S.plan_shipped([_new_row()], tmp_path)[tmp_path / "jax.toml"]) > 1_200_000


@pytest.mark.parametrize("torch_index", [TORCH + "/", TORCH])
def test_torch_pins_are_read_for_linux_x86_64_and_the_variant_index_may_end_in_a_slash(monkeypatch, torch_index):
    ix = Index()
    marker = "; platform_system == 'Linux' and platform_machine == 'x86_64'"
    ix.add("torch", f"torch-2.9.0-cp312-cp312-{X86}.whl", [f"nvidia-cuda-runtime-cu12==12.8.90{marker}"])
    ix.add("torchvision", f"torchvision-0.24.0-cp312-cp312-{X86}.whl", ["torch==2.9.0"])
    ix.add("torch", f"torch-2.9.0+cu126-cp312-cp312-{X86}.whl", [f"nvidia-cuda-runtime-cu12==12.6.77{marker}"], index=TORCH)
    ix.add("torchvision", f"torchvision-0.24.0+cu126-cp312-cp312-{X86}.whl", ["torch==2.9.0"], index=f"{TORCH}/cu126")
    ix.install(monkeypatch)
    result = R.find_updates(Http(), _settings(frameworks=("torch",), torch_index=torch_index), MATRIX)
    assert [(r.data["variant"], r.data["cuda"], r.data.get("index_url")) for r in result.rows] == [
        ("cu128", "12.8", None), ("cu126", "12.6", f"{TORCH}/cu126")]


# --------------------------------------------------------------------------- which torchvision goes with a torch

_SERIES = [(f"0.{15 + i}.0", f"==2.{i}.0", [None]) for i in range(9)]  # torchvision 0.15 .. 0.23 for torch 2.0 .. 2.8

COMPANIONS = [  # (torch, local, torchvision releases as (version, torch requirement or None, locals), chosen)
    # the newest release that requires this torch, when several do
    ("2.9.0", None, [("0.24.0", "==2.9.0", [None]), ("0.24.1", ">=2.9.0,<2.10", [None])], "0.24.1"),
    # the release of this torch's series by the historical offset, even when six newer ones exist
    ("2.0.0", None, _SERIES, "0.15.0"),
    # no release of the series by offset: the six newest are tried, newest first
    ("3.0.0", None, [*_SERIES, ("1.0.0", "==3.0.0", [None])], "1.0.0"),
    ("3.0.0", None, [*_SERIES, ("1.0.0", "==3.0.0", [None]), ("1.1.0", "==3.0.0", [None])], "1.1.0"),
    # ... and never a seventh
    ("3.0.0", None, [("0.9.0", "==3.0.0", [None]), *[(f"1.{i}.0", "==3.1.0", [None]) for i in range(6)]], None),
    ("3.0.0", None, [("0.9.0", "==3.0.0", [None]), *[(f"1.{i}.0", "==3.1.0", [None]) for i in range(5)]], "0.9.0"),
    # a requirement of the same series that excludes this torch, or no requirement on torch at all
    ("2.9.1", None, [("0.24.0", "==2.9.0", [None])], None),
    ("2.9.1", None, [("0.24.0", None, [None])], None),
    ("2.9.1", None, [("0.24.0", None, [None]), ("0.24.1", "==2.9.1", [None])], "0.24.1"),
    # a requirement that holds torch but whose lower bound is another series
    ("2.9.1", None, [("0.24.1", ">=2.8.0", [None])], None),
    # on a variant index: only the wheels of that variant; without one, every wheel of the release
    ("2.9.0", "cu128", [("0.24.0", "==2.9.0", ["cu126", "cu128"])], "0.24.0"),
    ("2.9.0", "cu128", [("0.24.0", "==2.9.0", ["cu126"])], None),
    ("2.9.0", None, [("0.24.0", "==2.9.0", ["cpu"])], "0.24.0"),
]


@pytest.mark.parametrize("torch,local,rels,chosen", COMPANIONS)
def test_the_torchvision_of_a_torch_release(monkeypatch, torch, local, rels, chosen):
    ix = Index()
    for version, requires, locals_ in rels:
        for loc in locals_:
            ix.add("torchvision", f"torchvision-{version}{'+' + loc if loc else ''}-cp312-cp312-{X86}.whl",
                   ["numpy", *([f"torch{requires}"] if requires else [])])
    ix.install(monkeypatch)
    got = U._TorchVision(U.IndexReader(Http(), _settings(), MATRIX, lambda s: None)).companion(Version(torch), local)
    assert (None if got is None else str(got[0])) == chosen
    if got is not None:
        wanted = [loc for v, _, locs in rels if v == chosen for loc in locs if local is None or loc == local]
        assert sorted(w.tags.local or "" for w in got[1]) == sorted(loc or "" for loc in wanted)
        assert got[2] == f"{PYPI}/f/{got[1][0].file.filename}"


def test_a_torch_wheel_that_states_only_its_cuda_major_inherits_the_minor_from_the_previous_row(monkeypatch):
    ix = Index()
    ix.add("torch", f"torch-2.9.0-cp312-cp312-{X86}.whl", ["nvidia-cuda-runtime-cu12", "nvidia-cudnn-cu12"])
    ix.add("torchvision", f"torchvision-0.24.0-cp312-cp312-{X86}.whl", ["torch==2.9.0"])
    ix.install(monkeypatch)
    (row,) = R.find_updates(Http(), _settings(frameworks=("torch",), torch_index=None), MATRIX).rows
    assert (row.data["variant"], row.data["cuda"], row.data["cudnn"]) == ("cuda12", "12.8", "9.7.1.26")
    assert "cuda not stated by the wheel; inherited from torch-2.8.0 cu128" in row.data["note"]


def test_a_variant_row_reads_only_its_own_variant_s_torchvision_wheels(monkeypatch):
    # A page that also lists another build's torchvision wheel (here a CPU one for Python 3.13):
    # the cu126 row's Pythons are those of its own torchvision wheels.
    ix = Index()
    cu126 = ["nvidia-cuda-runtime-cu12==12.6.77", "nvidia-cudnn-cu12==9.5.1.17"]
    for py in ("cp312", "cp313"):
        ix.add("torch", f"torch-2.9.0-{py}-{py}-{X86}.whl", ["filelock"])
        ix.add("torch", f"torch-2.9.0+cu126-{py}-{py}-{X86}.whl", cu126, index=TORCH)
    ix.add("torchvision", f"torchvision-0.24.0-cp312-cp312-{X86}.whl", ["torch==2.9.0"])
    ix.add("torchvision", f"torchvision-0.24.0-cp313-cp313-{X86}.whl", ["torch==2.9.0"])
    ix.add("torchvision", f"torchvision-0.24.0+cu126-cp312-cp312-{X86}.whl", ["torch==2.9.0"], index=f"{TORCH}/cu126")
    ix.add("torchvision", f"torchvision-0.24.0+cpu-cp313-cp313-{X86}.whl", ["torch==2.9.0"], index=f"{TORCH}/cu126")
    ix.install(monkeypatch)
    rows = R.find_updates(Http(), _settings(frameworks=("torch",)), MATRIX).rows
    assert [(r.data["variant"], r.data["python"]) for r in rows] == [("cpu", ["3.12", "3.13"]), ("cu126", ["3.12"])]


def test_check_rows_still_refuses_a_row_after_one_that_does_not_load(tmp_path):
    missing, broken = _new_row("9.9.7"), _new_row("9.9.8")

    def render(stack):
        raise UserError("cannot render", where="render")

    from envman.errors import UserError

    text = S.plan_overlay([broken], tmp_path / "o.toml")[tmp_path / "o.toml"]
    ok, why = S.check_rows([missing, broken], _shipped(), {tmp_path / "o.toml": text}, render)
    assert ok == [] and why == ["jax-9.9.7-cuda13.0 (cuda13): not loaded", "jax-9.9.8-cuda13.0 (cuda13): render: cannot render"]


def test_pythons_are_ordered_as_versions_not_as_text(monkeypatch):
    ix = Index()
    for py in ("cp39", "cp310"):
        for abi in (py, py + "t"):
            ix.add("torch", f"torch-2.9.0-{py}-{abi}-{X86}.whl", ["filelock"])
            ix.add("torchvision", f"torchvision-0.24.0-{py}-{abi}-{X86}.whl", ["torch==2.9.0"])
    ix.install(monkeypatch)
    (row,) = R.find_updates(Http(), _settings(frameworks=("torch",), torch_index=None), MATRIX).rows
    assert (row.data["python"], row.data["python_freethreaded"]) == (["3.9", "3.10"], ["3.9", "3.10"])


@pytest.mark.parametrize("arm_marker,arm_pin,platforms", [
    ("aarch64", "12.8.90", ["linux/amd64", "linux/arm64"]),  # read as on aarch64: the same CUDA
    ("aarch64", "12.6.77", ["linux/amd64"]),
    ("x86_64", "12.8.90", ["linux/amd64"]),  # pins for x86_64 only: a CPU build on arm64
])
def test_an_arm64_wheel_s_pins_are_read_as_on_aarch64(monkeypatch, arm_marker, arm_pin, platforms):
    ix = Index()
    on = "; platform_system == 'Linux' and platform_machine == '{}'"
    ix.add("torch", f"torch-2.9.0-cp312-cp312-{X86}.whl", [f"nvidia-cuda-runtime-cu12==12.8.90{on.format('x86_64')}"])
    ix.add("torch", f"torch-2.9.0-cp312-cp312-{ARM}.whl", [f"nvidia-cuda-runtime-cu12=={arm_pin}{on.format(arm_marker)}"])
    for plat in (X86, ARM):
        ix.add("torchvision", f"torchvision-0.24.0-cp312-cp312-{plat}.whl", ["torch==2.9.0"])
    ix.install(monkeypatch)
    (row,) = R.find_updates(Http(), _settings(frameworks=("torch",), torch_index=None), MATRIX).rows
    assert (row.data["cuda"], row.data["platforms"]) == ("12.8", platforms)


def test_a_plain_wheel_on_pytorch_s_index_is_no_variant(monkeypatch):
    ix = Index()
    ix.add("torch", f"torch-2.9.0-cp312-cp312-{X86}.whl", ["filelock"])
    ix.add("torchvision", f"torchvision-0.24.0-cp312-cp312-{X86}.whl", ["torch==2.9.0"])
    ix.add("torch", f"torch-2.9.0-cp312-cp312-{X86}.whl", ["filelock"], index=TORCH)  # no +local: the PyPI build
    ix.add("torch", f"torch-2.8.0+cu126-cp312-cp312-{X86}.whl", ["filelock"], index=TORCH)  # not a new release
    ix.add("torch", f"torch-2.9.0+cu126-cp312-cp312-{X86}.whl", ["nvidia-cuda-runtime-cu12==12.6.77"], index=TORCH)
    ix.add("torchvision", f"torchvision-0.24.0+cu126-cp312-cp312-{X86}.whl", ["torch==2.9.0"], index=f"{TORCH}/cu126")
    ix.install(monkeypatch)
    rows = R.find_updates(Http(), _settings(frameworks=("torch",)), MATRIX).rows
    assert [(r.data["version"], r.data["variant"]) for r in rows] == [("2.9.0", "cpu"), ("2.9.0", "cu126")]


# --------------------------------------------------------------------------- backfill


def _ctx(builds, **settings):
    return SimpleNamespace(matrix=SimpleNamespace(builds=builds), settings=_settings(**settings))


@pytest.mark.parametrize("backfill, since, want", [
    (True, None, ["2.8.1", "2.8.2", "2.9.1", "2.10.0"]),  # the patches of the minors it has, and what is newer
    (False, None, ["2.9.1", "2.10.0"]),  # only newer than the matrix (matrix update --check)
    (True, "2.8.1", ["2.8.2", "2.9.1", "2.10.0"]),  # --since bounds the backfill too
])
def test_missing_patch_releases_of_known_minors_are_backfilled(backfill, since, want):
    builds = [_build("torch", "2.8.0", "cu128"), _build("torch", "2.9.0", "cu128")]
    ctx = _ctx(builds, since={"torch": Version(since)} if since else {})
    available = [Version(v) for v in ("2.7.1", "2.8.0", "2.8.1", "2.8.2", "2.8.2.post1", "2.9.0", "2.9.1", "2.10.0",
                                      "2.10.0.post1")]
    assert [str(v) for v in U._newer(ctx, "torch", available, backfill=backfill)] == want  # 2.7.x: no row of 2.7


def test_backfill_derives_a_row_for_a_missing_patch_release(monkeypatch):
    ix = Index()
    for v in ("2.21.0", "2.20.1"):
        ix.add("tensorflow", f"tensorflow-{v}-cp312-cp312-{X86}.whl",
               ["nvidia-cuda-runtime-cu12==12.5.82; extra == 'and-cuda'", "nvidia-cudnn-cu12==9.3.0.75; extra == 'and-cuda'"])
    ix.install(monkeypatch)
    builds = [*MATRIX.builds, _build("tensorflow", "2.20.0", "gpu", "12.5", "9.3", ["6.0", "8.0"], ["9.0"])]
    m = SimpleNamespace(**{**vars(MATRIX), "builds": builds})
    result = R.find_updates(Http(timeout=1, retries=0), _settings(frameworks=("tensorflow",)), m)
    assert result.new_releases == {"tensorflow": ["2.20.1"]}
    assert [r.key for r in result.rows] == [("tensorflow", "2.20.1", "gpu")]
    none = R.find_updates(Http(timeout=1, retries=0), _settings(frameworks=("tensorflow",), backfill=False), m)
    assert none.rows == [] and none.new_releases == {}
