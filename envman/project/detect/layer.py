"""The rest of a repository's requirements, as a project layer on top of its stack.

Every line of the repository's own requirements (its requirements file with its ``-r`` includes,
or the pip and conda lists of its conda file, or its package's dependencies) gets one outcome:

* **kept**: installed in the project image;
* **provided**: the stack already has it (the framework at the pinned release, its companions):
  not reinstalled, so the stack's build is what runs;
* **left out**, with the reason: an index option (the stack's index serves the framework), the
  repository itself (``-e .``: installed at run time from ``/workspace``), a conda-only package
  (``cudatoolkit``, ``mkl``: the stack's CUDA build and the wheels bring their own), a CUDA library
  the framework's wheel pins itself, a line the image build may not take;
* **refused**: a pin that would replace the stack's framework or its CUDA libraries. One refusal
  stops ``project init`` with the line, the pin and the stack.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envman.project.detect.pins import COMPANIONS, FRAMEWORK_DISTS, OWN_RELEASES, cuda_of_tag
from envman.project.detect.repo import Repository
from envman.project.detect.setupfiles import literal_strings, read_setup_py

if TYPE_CHECKING:
    from envman.stack.names import Stack

KEPT, PROVIDED, LEFT_OUT, REFUSED = "kept", "provided", "left out", "refused"

#: conda packages with no PyPI counterpart worth installing (the stack brings its own, or they are
#: conda's plumbing), by exact name or by prefix.
CONDA_ONLY = frozenset({
    "python", "pip", "setuptools", "wheel", "cudatoolkit", "cudatoolkit-dev", "cudnn", "nccl", "pytorch-cuda",
    "pytorch-mutex", "cpuonly", "mkl", "mkl-service", "mkl_fft", "mkl_random", "mkl-include", "intel-openmp", "blas",
    "openblas", "ld_impl_linux-64", "ncurses", "readline", "sqlite", "tk", "xz", "zlib", "openssl", "ca-certificates",
    "ffmpeg", "jpeg", "libpng", "freetype", "lcms2", "lz4-c", "zstd", "bzip2", "expat", "gmp", "mpfr", "magma",
    "cuda-version", "cuda-toolkit", "cuda", "cudatoolkit", "tbb", "yaml", "libffi", "certifi", "pillow-simd",
    "nodejs", "git", "cmake", "ninja", "make", "pkg-config", "gcc", "gxx", "cxx-compiler", "c-compiler", "sysroot_linux-64",
})
CONDA_ONLY_PREFIXES = ("lib", "_", "cuda-", "magma-", "gcc_", "gxx_", "mkl-", "icu", "font", "x264", "openh264", "gst")
#: conda names whose PyPI name differs.
CONDA_TO_PYPI = {"pytorch": "torch", "pytorch-gpu": "torch", "pytorch-cpu": "torch", "py-opencv": "opencv-python",
                 "opencv": "opencv-python", "matplotlib-base": "matplotlib", "tensorflow-base": "tensorflow",
                 "pytorch-lightning": "pytorch-lightning", "protobuf": "protobuf", "pyyaml": "pyyaml"}
#: Distributions that carry CUDA libraries a framework's wheel pins itself.
_CUDA_LIB_RE = re.compile(r"nvidia-[a-z0-9-]+-cu[0-9]{2}|jax-cuda[0-9]+-(plugin|pjrt)|cudatoolkit|nvidia-tensorrt|tensorrt")


@dataclass(frozen=True)
class LayerLine:
    file: str
    line: int
    text: str
    outcome: str  # KEPT, PROVIDED, LEFT_OUT, REFUSED
    requirement: str = ""  # what goes into the project image (KEPT)
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "text": self.text, "outcome": self.outcome,
                "requirement": self.requirement, "why": self.why}


@dataclass(frozen=True)
class Layer:
    source: str | None  # the file (or files) the requirements came from
    lines: tuple[LayerLine, ...] = field(default=())

    @property
    def kept(self) -> list[str]:
        return [ln.requirement for ln in self.lines if ln.outcome == KEPT]

    @property
    def refused(self) -> list[LayerLine]:
        return [ln for ln in self.lines if ln.outcome == REFUSED]

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "requirements": self.kept, "lines": [ln.to_json() for ln in self.lines]}


def _stack_packages(stack: "Stack") -> dict[str, str]:
    """The stack's own distributions and their versions (local labels dropped)."""
    out: dict[str, str] = {}
    for p in stack.packages:
        try:
            req = Requirement(p)
        except InvalidRequirement:
            continue
        pins = [s.version for s in req.specifier if s.operator in ("==", "===")]
        if pins:
            out[canonicalize_name(req.name)] = pins[0].split("+")[0]
    fw = {"torch": "torch", "tensorflow": "tensorflow", "jax": "jax", "onnxruntime": "onnxruntime"}[stack.framework] \
        if stack.framework in ("torch", "tensorflow", "jax", "onnxruntime") else stack.framework
    out.setdefault(fw, stack.framework_version)
    return out


def judge(requirement: str, stack: "Stack") -> tuple[str, str]:
    """(outcome, why) of one requirement (a PEP 508 string) on ``stack``."""
    from envman.project.detect.pins import applies_on_linux
    from envman.project.requirements import requirement_problem

    try:
        req = Requirement(requirement)
    except InvalidRequirement:
        return LEFT_OUT, "not a requirement pip reads"
    if req.marker is not None and not applies_on_linux(req.marker):
        return LEFT_OUT, f"its marker ({req.marker}) never holds on the stack's Linux"
    dist = canonicalize_name(req.name)
    have = _stack_packages(stack)
    framework_of = FRAMEWORK_DISTS.get(dist, (COMPANIONS.get(dist), None))[0]
    if framework_of is not None or dist in have:
        if framework_of is not None and framework_of != stack.framework:
            pass  # another framework (a tool): installed like any package
        else:
            mine = have.get(dist) or (stack.framework_version if framework_of == stack.framework and dist in FRAMEWORK_DISTS else None)
            if mine is None:
                return _kept(requirement, requirement_problem)

            from envman.project.detect.pins import public_spec, release_meets

            try:
                spec = SpecifierSet(public_spec(req.specifier)[0])
                if framework_of == stack.framework and dist in FRAMEWORK_DISTS and dist not in OWN_RELEASES:
                    # the framework's pin names the stack's release, or the post release it installs
                    ok = release_meets(spec, Version(stack.framework_version), (Version(mine),))
                else:
                    ok = spec.contains(Version(mine), prereleases=True)
            except (InvalidVersion, ValueError):
                ok = False
            local = next((s.version.split("+", 1)[1] for s in req.specifier if "+" in s.version), None)
            wants = cuda_of_tag(local) if local else None
            if ok and wants and stack.cuda and not (stack.cuda == wants or stack.cuda.startswith(wants + ".")):
                ok = False  # another CUDA (``+cu101`` on an 11.0 stack); a major alone (``+cuda11.cudnn86``) names any of its minors
            if ok:
                return PROVIDED, f"the stack has {dist} {mine}: not reinstalled"
            return REFUSED, f"would replace the stack's {dist} {mine} ({stack.name})"
    if _CUDA_LIB_RE.fullmatch(dist):
        wants = cuda_of_tag(dist)
        if stack.cuda is None:
            return LEFT_OUT, "a CUDA library, and the stack is a CPU build"
        if wants and stack.cuda and not (stack.cuda == wants or stack.cuda.startswith(wants + ".")):
            return REFUSED, f"CUDA {wants} libraries would replace the stack's CUDA {stack.cuda} ({stack.name})"
        return LEFT_OUT, f"a CUDA library the stack's {stack.framework} build brings itself (CUDA {stack.cuda})"
    return _kept(requirement, requirement_problem)


def _kept(requirement: str, problem: Any) -> tuple[str, str]:
    why = problem(requirement)
    return (LEFT_OUT, why) if why else (KEPT, "")


def requirements_layer(repo: Repository, stack: "Stack") -> Layer:
    """The project layer of ``repo`` on ``stack``: its main requirements file, else its conda
    file, else its package's own dependencies (``pyproject.toml``, ``setup.py``)."""
    main = _main_requirements(repo)
    if main is not None:
        return Layer(main, tuple(_requirements_lines(repo, main, stack, set(), 0)))
    conda = next(iter(repo.matching(r"(environment|env|conda)[^/]*\.ya?ml", max_depth=0)), None)
    if conda is not None:
        lines = _conda_lines(repo, conda, stack)
        if lines is not None:
            return Layer(conda, tuple(lines))
    deps = _package_lines(repo, stack)
    if deps is not None:
        return Layer(deps[0], tuple(deps[1]))
    return Layer(None, ())


def _main_requirements(repo: Repository) -> str | None:
    files = repo.matching(r"requirements[^/]*\.txt", max_depth=0)
    if "requirements.txt" in files:
        return "requirements.txt"
    plain = [f for f in files if not re.search(r"dev|test|doc|lint|ci|optional|extra|example", f)]
    return plain[0] if plain else None


def _requirements_lines(repo: Repository, rel: str, stack: "Stack", seen: set[str], depth: int) -> list[LayerLine]:
    from envman.project.detect.sources import line_numbers, relative_path, requirement_text, split_option
    from envman.project.requirements import requirement_lines

    if rel in seen or depth > 8:
        return []
    seen.add(rel)
    text = repo.read(rel)
    if text is None:
        return [LayerLine(rel, 0, rel, LEFT_OUT, why="cannot be read (too large, binary, or outside the repository)")]
    number = line_numbers(text)
    out: list[LayerLine] = []
    for logical in requirement_lines(text):
        no = number(logical)
        option = split_option(logical)
        if option is not None:
            opt, value = option
            if opt in ("-r", "--requirement"):
                target = relative_path(rel, value)
                if target is None:
                    out.append(LayerLine(rel, no, logical, LEFT_OUT, why="includes a file outside the repository"))
                else:
                    out += _requirements_lines(repo, target, stack, seen, depth + 1)
                continue
            if opt in ("-c", "--constraint"):
                out.append(LayerLine(rel, no, logical, LEFT_OUT, why="a constraints file: the stack fixes the framework"))
                continue
            out.append(LayerLine(rel, no, logical, LEFT_OUT, why="an index option: the stack's own index serves its framework; "
                                 "other packages come from envman's configured index"))
            continue
        if re.match(r"(-e|--editable)\b", logical) or logical.strip() in (".", "./") or logical.startswith(("./", "../")):
            out.append(LayerLine(rel, no, logical, LEFT_OUT,
                                 why="the repository itself (or a local folder): install it at run time from /workspace "
                                     "(envman run -- pip install --user -e .)"))
            continue
        if logical.startswith("-"):
            out.append(LayerLine(rel, no, logical, LEFT_OUT, why="a pip option the project layer does not take"))
            continue
        from envman.project.requirements import requirement_problem

        req = requirement_text(logical)
        outcome, why = judge(req, stack)
        problem = requirement_problem(logical) if outcome == KEPT else None
        if problem:  # its per-line options are what the image build may not take
            outcome, why = LEFT_OUT, problem
        out.append(LayerLine(rel, no, logical, outcome, logical if outcome == KEPT else "", why))
    return out


def _conda_lines(repo: Repository, rel: str, stack: "Stack") -> list[LayerLine] | None:
    from envman.project.detect.sources import CONDA_TORCH_CUDA_SELECTOR, conda_document, conda_spec

    doc = conda_document(repo, rel)
    if doc is None:
        return None
    out: list[LayerLine] = []
    for item in doc["dependencies"]:
        if isinstance(item, dict):
            for no, text in item.get("pip", []):
                word = text.strip()
                if word.startswith("-"):
                    out.append(LayerLine(rel, no, word, LEFT_OUT, why="a pip option: the stack's index serves its framework"))
                    continue
                outcome, why = judge(word, stack)
                out.append(LayerLine(rel, no, word, outcome, word if outcome == KEPT else "", why))
            continue
        no, text = item
        parsed = conda_spec(text)
        if parsed is None:
            out.append(LayerLine(rel, no, text, LEFT_OUT, why="not a conda package spec envman reads"))
            continue
        name, spec, _build = parsed
        if name in CONDA_ONLY or name.startswith(CONDA_ONLY_PREFIXES) or CONDA_TORCH_CUDA_SELECTOR.fullmatch(name):
            why = ("conda-only: the stack's Python" if name in ("python", "pip", "setuptools", "wheel")
                   else "conda-only: the stack's CUDA build brings its own" if re.match(r"cud|nccl|pytorch-cuda|magma", name)
                   else "conda-only (no PyPI wheel to install in its place): add it as an apt package if the code needs it")
            out.append(LayerLine(rel, no, text, LEFT_OUT, why=why))
            continue
        pypi = CONDA_TO_PYPI.get(name, name)
        requirement = pypi + (spec if spec and not spec.startswith(("!",)) else "")
        outcome, why = judge(requirement, stack)
        out.append(LayerLine(rel, no, text, outcome, requirement if outcome == KEPT else "",
                             why or (f"as the PyPI package {pypi}" if pypi != name else "")))
    return out


def _package_lines(repo: Repository, stack: "Stack") -> tuple[str, list[LayerLine]] | None:
    from envman.project.detect.sources import read_pyproject

    for rel, reader in (("pyproject.toml", read_pyproject), ("setup.py", read_setup_py)):
        if rel not in repo.file_set:
            continue
        reqs = _dependency_strings(repo, rel)
        if reqs:
            out = []
            for no, text in reqs:
                outcome, why = judge(text, stack)
                out.append(LayerLine(rel, no, text, outcome, text if outcome == KEPT else "", why))
            return rel, out
    return None


def _dependency_strings(repo: Repository, rel: str) -> list[tuple[int, str]]:
    """The package's own dependencies (PEP 621 ``dependencies``, or ``install_requires`` of setup.py)."""

    text = repo.read(rel)
    if text is None:
        return []
    if rel.endswith(".toml"):
        from envman.safefile import toml_module

        try:
            doc = toml_module().loads(text)
        except (ValueError, RecursionError):
            return []
        from envman.project.detect.sources import line_numbers

        deps = doc["project"].get("dependencies") if isinstance(doc.get("project"), dict) else None
        if not isinstance(deps, list):
            return []  # a string or a table is no dependency list (iterating it would give letters or keys)
        number = line_numbers(text)
        return [(number(d), d) for d in deps[:2000] if isinstance(d, str)]

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names = {n.targets[0].id: n.value for n in tree.body
             if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "setup":
            for kw in node.keywords:
                if kw.arg == "install_requires":
                    return [(c.lineno, str(c.value)) for c in literal_strings(kw.value, names)][:2000]
    return []


def requirements_refusal(layer: Layer) -> str | None:
    """The one line ``project init`` stops with when a requirement would replace the stack's own."""
    refused = layer.refused
    if not refused:
        return None
    r = refused[0]
    more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
    return f"{r.file}:{r.line}: {r.text!r} {r.why}{more}"


def toml_list(requirements: Iterable[str]) -> str:
    """The kept requirements as a TOML array (one per line), for the project file."""

    items = [json.dumps(r, ensure_ascii=False) for r in requirements]
    return "[\n" + "".join(f"    {i},\n" for i in items) + "]"


def replacing_requirement(text: str, stack: "Stack") -> str | None:
    """The first line of a project's requirements that would replace ``stack``'s framework or its
    CUDA libraries (:func:`judge` refuses it), as one line; ``None`` when none would. Checked
    before a project image is built, whatever wrote the requirements."""
    from envman.project.detect.sources import requirement_text, split_option
    from envman.project.requirements import requirement_lines

    for line in requirement_lines(text):
        if line.startswith("-") or split_option(line) is not None:
            continue
        outcome, why = judge(requirement_text(line), stack)
        if outcome == REFUSED:
            return f"requirement {line[:120]!r} {why}"
    return None
