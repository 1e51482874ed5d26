"""What one requirement says about the stack: ``torch==1.10.0+cu113`` → torch ==1.10.0 and CUDA
11.3; ``jaxlib==0.1.69+cuda111`` → jax's CUDA 11.1; ``tensorflow-gpu==1.15.4`` → tensorflow
==1.15.4, GPU; ``cupy-cuda102`` → CUDA 10.2; ``mxnet-cu101`` → MXNet, which no stack serves.

Pure functions of the requirement's text (PEP 508, read with ``packaging``), shared by every
reader of the pins a repository writes (requirements files, setup.py, pyproject, Pipfile, the pip
part of a conda file, ``pip install`` in a Dockerfile or a README).
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator
from urllib.parse import unquote, urlsplit

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envman.project.detect.facts import CUDA, FRAMEWORK, PYTHON, UNSUPPORTED, Fact

#: Distribution names of the frameworks → (framework, which build: True GPU, False CPU, None either).
FRAMEWORK_DISTS: dict[str, tuple[str, bool | None]] = {
    "torch": ("torch", None),
    "pytorch": ("torch", None),  # PyPI's "pytorch" is a stub that says to install torch; repositories still write it
    "torch-gpu": ("torch", True),
    "pytorch-gpu": ("torch", True),  # conda-forge
    "pytorch-cpu": ("torch", False),
    "tensorflow": ("tensorflow", None),
    "tensorflow-gpu": ("tensorflow", True),
    "tensorflow-cpu": ("tensorflow", False),
    "intel-tensorflow": ("tensorflow", False),
    "tensorflow-intel": ("tensorflow", False),
    "jax": ("jax", None),
    "jaxlib": ("jax", None),
    "onnxruntime": ("onnxruntime", False),
    "onnxruntime-gpu": ("onnxruntime", True),
}

#: Packages whose release fixes the framework's (read against the matrix rows' own pins).
COMPANIONS = {"torchvision": "torch", "torchaudio": "torch", "torchtext": "torch"}

#: Framework distributions released apart from the framework (jax 0.2.5 installs jaxlib 0.1.56): a pin
#: of one names the framework releases of the rows that install that release of it.
OWN_RELEASES = {"jaxlib"}

#: Distributions of frameworks no stack serves (the prefix of ``mxnet-cu101`` included).
UNSUPPORTED_DISTS = {
    "theano": "theano",
    "theano-pymc": "theano",
    "lasagne": "theano",
    "mxnet": "mxnet",
    "gluoncv": "mxnet",
    "chainer": "chainer",
    "cntk": "cntk",
    "cntk-gpu": "cntk",
    "paddlepaddle": "paddle",
    "paddlepaddle-gpu": "paddle",
    "caffe": "caffe",
    "caffe2": "caffe2",
    "mindspore": "mindspore",
    "mindspore-gpu": "mindspore",
    "mlx": "mlx",
    "mlx-lm": "mlx",
    "jittor": "jittor",
    "megengine": "megengine",
    "oneflow": "oneflow",
}

#: CUDA in a local version, a wheel variant, an extra or a package name: ``+cu113``, ``cu92``,
#: ``+cuda111``, ``+cuda11.cudnn82``, ``cuda12``, ``cuda11x``, ``cuda12_pip``, ``cupy-cuda102``.
_CU_RE = re.compile(r"(?<![a-z])cu(?:da)?[-_]?([0-9]{1,3})(?:\.([0-9]))?(x)?(?![0-9])")
#: The framework indexes' CUDA path parts: ``/whl/cu113``, ``/whl/cu118/torch_stable.html``.
_INDEX_CU_RE = re.compile(r"/whl/(?:nightly/)?(cu[0-9]{2,3}|cpu|rocm[0-9.]+)(?:[/.]|$)")


def cuda_of_tag(tag: str) -> str | None:
    """``cu113`` → ``11.3``, ``cu92`` → ``9.2``, ``cuda111`` → ``11.1``, ``cuda11`` / ``cuda11x`` /
    ``cuda12_pip`` → the major (``11``), ``cuda11.8`` → ``11.8``; ``None`` when it names no CUDA.
    Three digits are a major of two and a minor; two digits are a major and a minor when the major
    is one digit (7, 8, 9: CUDA 10 came after 9.2), else a major alone."""
    m = _CU_RE.search(tag.lower())
    if not m:
        return None
    digits, minor, x = m.groups()
    if minor is not None:
        return f"{int(digits)}.{minor}"
    if x or len(digits) == 1:
        return str(int(digits))
    if len(digits) == 3:
        return f"{int(digits[:2])}.{digits[2]}"
    if digits[0] in "789":
        return f"{digits[0]}.{digits[1]}"
    return str(int(digits))


def cuda_of_index(url: str) -> tuple[str | None, bool] | None:
    """The CUDA of a framework index URL (``https://download.pytorch.org/whl/cu113``): (``"11.3"``,
    True); (None, False) for a ``/cpu`` index; ``None`` when the URL names neither."""
    m = _INDEX_CU_RE.search(url.lower())
    if not m:
        return None
    part = m.group(1)
    if part == "cpu":
        return None, False
    if part.startswith("rocm"):
        return None
    return cuda_of_tag(part), True


#: OpenMMLab's wheel index of one CUDA and torch (``.../mmcv/dist/cu111/torch1.9.0/index.html``):
#: its wheels are compiled against that torch minor (a ``1.x.0`` build serves ``1.x.*``) and CUDA.
_OPENMMLAB_INDEX_RE = re.compile(r"/mmcv/dist/(cu[0-9]{2,3}|cpu)/torch([0-9]{1,2}\.[0-9]{1,3})(?:\.[0-9]{1,3})?(?:/|$)")


def openmmlab_index(url: str) -> list[Fact]:
    """The torch minor and CUDA an OpenMMLab wheel index URL names (its compiled packages need
    both); nothing for another URL or a template (``{cu_version}/{torch_version}``)."""
    m = _OPENMMLAB_INDEX_RE.search(url.lower())
    if not m:
        return []
    cuda = None if m.group(1) == "cpu" else cuda_of_tag(m.group(1))
    if m.group(1) != "cpu" and cuda is None:
        return []
    return [Fact(FRAMEWORK, framework="torch", spec=f"=={m.group(2)}.*"), Fact(CUDA, version=cuda)]


def index_cuda(url: str) -> Fact | None:
    """The CUDA statement of PyTorch's wheel index URL (see :func:`cuda_of_index`): the CUDA of
    the torch wheels it serves, never of another framework installed beside them."""
    found = cuda_of_index(url)
    if found is None:
        return None
    return Fact(CUDA, version=found[0] if found[1] else None, framework="torch")


def spec_text(spec: SpecifierSet) -> str:
    """A specifier set written in a stable order (``>=1.7,<2``)."""
    return ",".join(sorted((str(s) for s in spec), key=lambda s: (s.lstrip("<>=!~"), s)))


def exact_version(spec: str) -> str | None:
    """The version an exact pin names (``==1.7.1``, ``===1.7.1``, ``==1.10.0+cu113`` → ``1.10.0``), else None."""
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    pins = [p for p in parts if p.startswith("==") and not p.endswith(".*")]
    if len(pins) != 1:
        return None
    text = pins[0].lstrip("=").strip()
    try:
        return str(Version(text).public)
    except InvalidVersion:
        return None


def release_meets(spec: SpecifierSet, release: Version, installed: Iterable[Version] = ()) -> bool:
    """Whether a framework pin ``spec`` accepts a matrix row of ``release`` whose wheel is versioned
    ``installed`` (a post release that re-publishes the release: torch 0.3.0 ships as 0.3.0.post4).

    ``==0.3.0`` and ``==0.3.0.post4`` both name that row; a ``!=`` clause must hold for the release
    and for every installed version (``!=0.3.0`` and ``!=0.3.0.post4`` both refuse it). Installed
    versions of another release (a companion's) are ignored.
    """
    versions = (release, *(v for v in installed if v.release == release.release))
    if not all(s.contains(v, prereleases=True) for s in spec if s.operator == "!=" for v in versions):
        return False
    rest = SpecifierSet(",".join(str(s) for s in spec if s.operator != "!="))
    return any(rest.contains(v, prereleases=True) for v in versions)


def public_spec(spec: SpecifierSet) -> tuple[str, str | None]:
    """``spec`` without local version labels, and the local label of an exact pin (``+cu113``)."""
    local = None
    out = []
    for s in spec:
        version = s.version
        if "+" in version and not version.endswith(".*"):
            version, _, label = version.partition("+")
            local = label
        out.append(f"{s.operator}{version}")
    try:
        return spec_text(SpecifierSet(",".join(out))), local
    except InvalidSpecifier:
        return "", local


def _wheel_version(url: str, name: str) -> tuple[str | None, str | None]:
    """(version, local label) of a wheel file a URL names (``.../torch-1.9.0%2Bcu111-cp38-...whl``)."""

    file = unquote(url.rsplit("/", 1)[-1])
    m = re.match(re.escape(name).replace("\\-", "[-_]") + r"-([0-9][^-]*)-", file, re.IGNORECASE)
    if not m:
        return None, None
    version, _, local = m.group(1).partition("+")
    return version, local or None


def url_path(url: str) -> str:
    """The path of ``url``; ``""`` for one that does not parse (``https://jax[cuda12]``: a
    bracketed host that is no IP address)."""
    try:
        return urlsplit(url).path
    except ValueError:
        return ""


def wheel_facts(text: str) -> Iterator[Fact]:
    """The facts of a wheel named by its file or address (``.../whl/cu90/torch-1.0.0-cp35-cp35m-
    linux_x86_64.whl``): the release and the local version's CUDA as a pin of it, the folder's CUDA
    (``cu90``), and the Python of a ``cpXY`` tag."""

    path = unquote(url_path(text.strip())) if "://" in text else unquote(text.strip())
    try:
        name, version, _build, tags = parse_wheel_filename(path.rsplit("/", 1)[-1])
    except (InvalidWheelFilename, ValueError):
        return
    facts = list(_facts(str(name), SpecifierSet(f"=={version}"), None, set()))
    if not facts:
        return
    yield from facts
    folder = path.rpartition("/")[0]
    leaf = folder.rpartition("/")[2].lower()
    if version.local is None and (found := cuda_of_index(folder)) is not None:
        yield Fact(CUDA, version=found[0] if found[1] else None)
    elif version.local is None and re.fullmatch(r"cu(?:da)?[0-9]{2,3}", leaf):
        # a wheel in a folder named for its CUDA (Google's jax releases: .../cuda101/jaxlib-0.1.52-cp37-...whl)
        yield Fact(CUDA, version=cuda_of_tag(leaf))
    pythons = {t.interpreter for t in tags if re.fullmatch(r"cp3[0-9]{1,2}", t.interpreter)}
    if len(pythons) == 1:
        minor = pythons.pop()[3:]
        yield Fact(PYTHON, spec=f"==3.{minor}.*")


def requirement_facts(text: str) -> Iterator[Fact]:
    """The facts one PEP 508 requirement states (nothing for one that names no framework)."""
    if len(text) > 4096 or re.search(r"[0-9]{13}", text):
        return  # no version of any package has a part of 13 digits: such a line says nothing
    bare = text.split("#", 1)[0].split(";", 1)[0].strip()
    if bare.lower().endswith(".whl") and "@" not in bare.split("://", 1)[0]:
        yield from wheel_facts(bare)
        return
    try:
        req = Requirement(text.strip())
    except InvalidRequirement:
        return
    if req.marker is not None and not applies_on_linux(req.marker):
        return  # a line for another platform (``; sys_platform == 'darwin'``) says nothing of a Linux stack
    if req.url and url_path(req.url).lower().endswith(".whl"):
        yield from wheel_facts(req.url)  # ``torch @ https://…/torch-1.9.0+cu111-cp38-…whl``
        return
    yield from _facts(req.name, req.specifier, req.url, set(req.extras))


#: The Pythons a stack may have, to evaluate a marker that names one.
_PYTHONS = tuple(f"3.{m}" for m in range(6, 16))


def applies_on_linux(marker: Marker) -> bool:
    """Whether a requirement's environment marker holds on a Linux x86_64 CPython 3 for some
    Python a stack may have (``python_version`` is decided later; an ``extra`` never holds)."""
    for py in _PYTHONS:
        env = {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix", "platform_machine": "x86_64",
               "implementation_name": "cpython", "platform_python_implementation": "CPython",
               "python_version": py, "python_full_version": f"{py}.0", "implementation_version": f"{py}.0",
               "platform_release": "", "platform_version": "", "extra": ""}
        try:
            if marker.evaluate(env):
                return True
        except Exception:  # noqa: BLE001 - a marker packaging cannot evaluate says nothing against the line
            return True
    return False


def named_facts(name: str, spec_text_: str, extras: set[str] | None = None) -> Iterator[Fact]:
    """:func:`requirement_facts` for a name and a specifier given apart (Poetry, Pipfile, conda)."""
    if not isinstance(spec_text_, str) or len(spec_text_) > 4096 or re.search(r"[0-9]{13}", spec_text_):
        spec_text_ = ""
    try:
        spec = SpecifierSet(spec_text_)
    except InvalidSpecifier:
        spec = SpecifierSet()
    yield from _facts(name, spec, None, extras or set())


def _facts(name: str, specifier: SpecifierSet, url: str | None, extras: set[str]) -> Iterator[Fact]:
    dist = canonicalize_name(name)
    spec, local = public_spec(specifier)
    spec = _release_of_prerelease(spec)
    if url:
        version, local = _wheel_version(url, dist)
        spec = f"=={version}" if version else ""
        if not version and (found := cuda_of_index(url)):
            cuda, on_gpu = found
            yield Fact(CUDA, version=cuda) if on_gpu and cuda else Fact(CUDA, version=None)
    if dist in FRAMEWORK_DISTS:
        framework, build = FRAMEWORK_DISTS[dist]
        gpu: bool | None = build
        if local:
            cuda = cuda_of_tag(local)
            if cuda:
                gpu = True
                yield Fact(CUDA, version=cuda)
            elif local.lower() == "cpu":
                gpu = False
        if framework == "jax":
            for extra in sorted(extras):
                cuda = cuda_of_tag(extra)
                if cuda:
                    gpu = True
                    yield Fact(CUDA, version=cuda)
                elif extra in ("cuda", "gpu"):
                    gpu = True
                elif extra == "cpu":  # ``tpu`` says nothing of a CPU or GPU build: the code runs on an accelerator
                    gpu = False if gpu is None else gpu
            if dist in OWN_RELEASES:  # jaxlib's releases are not jax's: the rows that pin it say which jax
                version = exact_version(spec)
                yield Fact(FRAMEWORK, framework="jax", gpu=gpu, companion=f"jaxlib=={version}" if version else None)
                return
        if dist == "onnxruntime" and not spec:
            gpu = False
        yield Fact(FRAMEWORK, framework=framework, spec=spec, gpu=gpu)
        return
    if dist in COMPANIONS:
        version = exact_version(spec)
        if local and (cuda := cuda_of_tag(local)):
            yield Fact(CUDA, version=cuda)
        if version:
            yield Fact(FRAMEWORK, framework=COMPANIONS[dist], companion=f"{dist}=={version}")
        return
    if dist.startswith(("cupy-cuda", "mxnet-cu", "paddlepaddle-gpu")) or re.fullmatch(r"jax-cuda[0-9]+-(plugin|pjrt)", dist):
        if dist.startswith("mxnet"):
            yield Fact(UNSUPPORTED, framework="mxnet")
        cuda = cuda_of_tag(dist.split("-", 1)[1])
        if dist.startswith("jax-cuda"):
            yield Fact(FRAMEWORK, framework="jax", spec="", gpu=True)
        if cuda:
            yield Fact(CUDA, version=cuda)
        return
    if dist == "keras" and (keras := exact_version(spec)):
        tf = keras_tensorflow(keras)
        if tf:
            yield Fact(FRAMEWORK, framework="tensorflow", spec=tf)
        return
    m = re.fullmatch(r"nvidia-[a-z-]+-cu([0-9]{2})", dist)
    if m:
        yield Fact(CUDA, version=m.group(1))
        return
    if dist in UNSUPPORTED_DISTS:
        yield Fact(UNSUPPORTED, framework=UNSUPPORTED_DISTS[dist])


def _release_of_prerelease(spec: str) -> str:
    """An exact pin of a pre-release (``==2.3.0rc0``, ``==1.14.0b1``) as its release's minor
    (``==2.3.*``): the matrix holds releases, and the release a candidate became serves its code."""
    version = exact_version(spec)
    if version is None:
        return spec
    try:
        v = Version(version)
    except InvalidVersion:
        return spec
    if v.is_prerelease or v.is_devrelease:
        return f"=={v.release[0]}.{v.release[1] if len(v.release) > 1 else 0}.*"
    return spec


def keras_tensorflow(version: str) -> str | None:
    """The TensorFlow releases a pinned standalone Keras runs on, from Keras' release notes
    (github.com/keras-team/keras/releases): multi-backend Keras before 2.3 predates TF 2; 2.3 is
    the last multi-backend release, for TF 1.14/1.15 and 2.0-2.1; 2.4 redirects to tf.keras and needs
    TF 2.2; from 2.6 to 2.15 Keras is released with the TensorFlow of the same minor; Keras 3 runs
    on any of several backends (no constraint)."""
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    if v.major != 2:
        return None
    if v.minor < 3:
        return "<2.0"
    if v.minor == 3:
        return "<2.2"
    if v.minor in (4, 5):
        return ">=2.2,<2.6"
    if v.minor <= 15:
        return f"==2.{v.minor}.*"
    return None
