"""Which framework the code really uses: imports counted in ``*.py`` files (by pattern, nothing
imported or run; in notebooks' code cells when no ``*.py`` file imports one), Lua Torch's ``require 'torch'`` in ``*.lua`` files, Caffe's ``*.prototxt``, and
code that only Python 2 parses."""

from __future__ import annotations

import re
from collections import Counter
from itertools import islice

from envman.errors import counted
from envman.project.detect.facts import FRAMEWORK, IMPORTS, PROSE, RANGE, UNSUPPORTED, Fact, Statement
from envman.project.detect.repo import CODE_LIMIT, MAX_CODE_FILES, Repository
from envman.project.detect.shell import MAX_NOTEBOOKS, NOTEBOOK_LIMIT, NOTEBOOKS, notebook_code

#: Top-level modules → the framework (or unsupported framework) they belong to.
MODULES = {
    "torch": "torch", "torchvision": "torch", "torchaudio": "torch", "pytorch_lightning": "torch", "lightning": "torch",
    "tensorflow": "tensorflow", "keras": "tensorflow", "tf_keras": "tensorflow", "tensorflow_addons": "tensorflow",
    "jax": "jax", "jaxlib": "jax", "flax": "jax", "haiku": "jax", "optax": "jax", "equinox": "jax", "objax": "jax",
    "onnxruntime": "onnxruntime",
    "caffe": "caffe", "theano": "theano", "lasagne": "theano", "mxnet": "mxnet", "gluon": "mxnet",
    "chainer": "chainer", "cntk": "cntk", "paddle": "paddle", "mindspore": "mindspore", "mlx": "mlx",
    "jittor": "jittor", "megengine": "megengine", "oneflow": "oneflow",
}
#: Matches looked at per file: a file of one word repeated costs no more than a real one.
MAX_MATCHES = 500
#: ``import x`` / ``from x`` anywhere (the statement's start is checked apart: a pattern anchored
#: at each line start is scanned at every position of a file, several times slower).
_IMPORT_RE = re.compile(r"(?:import|from)[ \t]+([A-Za-z_][A-Za-z0-9_]*)")
#: Python 2 only: a print statement, ``print >>f``, ``except E, e:``, ``exec "..."``, at a line's start.
_PY2_WORD_RE = re.compile(r"(?:print|except|exec)\b")
_PY2_LINE_RE = re.compile(r"[ \t]*(?:print[ \t]+(?![=(\[.,)])[^\s]|print[ \t]*>>|except[ \t]+[\w.]+[ \t]*,[ \t]*\w+[ \t]*:"
                          r"|exec[ \t]+[\"'])")


def _at_line_start(text: str, pos: int) -> int | None:
    """The start of ``pos``'s line when only blanks stand before ``pos`` on it, else ``None``
    (looks back over the blanks only: a long line of many words costs linear time)."""
    i = pos - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i + 1 if i < 0 or text[i] == "\n" else None


def imported(text: str) -> set[str]:
    """The frameworks (keys of :data:`MODULES`' values) a source file imports."""
    found: set[str] = set()
    if "import" not in text:
        return found
    for m in islice(_IMPORT_RE.finditer(text), MAX_MATCHES):
        if m.group(1) in MODULES and _at_line_start(text, m.start()) is not None:
            found.add(MODULES[m.group(1)])
    return found


def python2_only(text: str) -> bool:
    """Whether a source file holds syntax only Python 2 parses (and no ``print_function`` import)."""
    if "print_function" in text or not ("print" in text or "except" in text or "exec" in text):
        return False
    for m in islice(_PY2_WORD_RE.finditer(text), MAX_MATCHES):
        start = _at_line_start(text, m.start())
        if start is not None and _PY2_LINE_RE.match(text, start):
            return True
    return False


#: Names TensorFlow 2 no longer has at ``tf.``: ``tf.contrib`` is gone even under ``tf.compat.v1``;
#: the others live on only there, so they count in a file that imports TensorFlow itself as ``tf``.
_TF1_CONTRIB_RE = re.compile(r"\btf\.contrib\.")
_TF1_RE = re.compile(r"(?<![\w.])tf\.(?:Session|placeholder|get_variable|variable_scope|global_variables_initializer|"
                     r"train\.Saver|app\.flags|layers\.conv2d|to_float|log\b|Print)\b")
_TF_COMPAT_RE = re.compile(r"import\s+tensorflow\.compat\.v1\s+as\s+tf\b|from\s+tensorflow\.compat\s+import\s+v1\s+as\s+tf\b")


def tensorflow_1_only(text: str) -> bool:
    """Whether a source file calls what only TensorFlow 1 has."""
    if "tf." not in text:
        return False
    if _TF1_CONTRIB_RE.search(text):
        return True
    return not _TF_COMPAT_RE.search(text) and _TF1_RE.search(text) is not None


_LUA_RE = re.compile(r"require\s*\(?\s*['\"](torch|nn|cutorch|cunn|cudnn|optim|nngraph)['\"]")


def read_code(repo: Repository) -> list[Statement]:
    """One statement per framework the code imports (how many files), and one for Lua Torch,
    Caffe model files, or Python 2 code when the repository is mostly that."""
    return scan_code(repo)[0]


def _folder(rel: str) -> str | None:
    """The top-level folder a file sits in (``None`` at the root)."""
    head, sep, _ = rel.partition("/")
    return head if sep else None


def folder_frameworks(per_folder: dict[str, Counter[str]]) -> dict[str, str]:
    """Top-level folders whose code imports one framework only (``tf/`` → ``tensorflow``): a
    repository holding one implementation per framework keeps each one's pins and prose beside it."""
    out: dict[str, str] = {}
    for folder, counts in per_folder.items():
        if len(counts) == 1:
            out[folder] = next(iter(counts))
    return out


def scan_code(repo: Repository) -> tuple[list[Statement], dict[str, str]]:
    """:func:`read_code`'s statements, and :func:`folder_frameworks` of the same files."""
    counts: Counter[str] = Counter()
    per_folder: dict[str, Counter[str]] = {}

    def tally(rel: str, framework: str) -> None:
        folder = _folder(rel)
        if folder is not None:
            per_folder.setdefault(folder, Counter())[framework] += 1
    examples: dict[str, str] = {}
    py_files = [f for f in repo.files if f.endswith(".py")][:MAX_CODE_FILES]
    py2 = 0
    tf1 = 0
    framework_files = 0
    for rel in py_files:
        text = repo.head(rel, CODE_LIMIT)
        if text is None:
            continue
        found = imported(text)
        for fw in found:
            counts[fw] += 1
            examples.setdefault(fw, rel)
            tally(rel, fw)
        if found:
            framework_files += 1
        if python2_only(text):
            py2 += 1
        if "tensorflow" in found and tensorflow_1_only(text):
            tf1 += 1
            examples.setdefault("tf1", rel)
    if not counts:
        # no Python file imports a framework: a repository of notebooks says it in their code cells
        for rel in repo.matching(NOTEBOOKS)[:MAX_NOTEBOOKS]:
            nb = repo.read(rel, limit=NOTEBOOK_LIMIT)
            for fw in imported(notebook_code(nb)) if nb else ():
                counts[fw] += 1
                examples.setdefault(fw, rel)
                tally(rel, fw)
    lua = 0
    for rel in [f for f in repo.files if f.endswith(".lua")][:MAX_CODE_FILES]:
        text = repo.head(rel, CODE_LIMIT)
        if text and _LUA_RE.search(text):
            lua += 1
            examples.setdefault("lua torch", rel)
            tally(rel, "lua torch")
    if lua:
        counts["lua torch"] += lua
    prototxt = [f for f in repo.files if f.endswith(".prototxt")]
    out = []
    for fw, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        kind = IMPORTS
        out.append(Statement(examples.get(fw, "*.py"), 0, f"{n} file{'s' if n != 1 else ''} import {fw} (e.g. {examples.get(fw)})",
                             "imports", RANGE, Fact(kind, framework=fw, count=n)))
    if prototxt and not counts:
        out.append(Statement(prototxt[0], 0, f"{len(prototxt)} Caffe model files (*.prototxt)", "imports", RANGE,
                             Fact(IMPORTS, framework="caffe", count=len(prototxt))))
    if tf1 and tf1 * 3 >= counts["tensorflow"]:
        out.append(Statement(examples["tf1"], 0, f"{counted(tf1, 'file')} call TensorFlow 1 APIs (tf.contrib, tf.Session, "
                             f"tf.placeholder; e.g. {examples['tf1']})", "imports", RANGE,
                             Fact(FRAMEWORK, framework="tensorflow", spec="<2")))
    checked = max(framework_files, 1) if framework_files else len(py_files)
    if py2 and py2 * 2 >= checked and py2 >= min(3, len(py_files)):
        out.append(Statement("*.py", 0, f"{py2} of {len(py_files)} Python files use Python 2 syntax (print statements, "
                             "'except E, e')", "imports", RANGE, Fact(UNSUPPORTED, framework="python 2")))
    elif py2:  # too few to say it alone; with a README naming Python 2 (and nothing naming 3), it does
        out.append(Statement("*.py", 0, f"{py2} of {len(py_files)} Python files use Python 2 syntax (print statements, "
                             "'except E, e')", "imports", PROSE, Fact(UNSUPPORTED, framework="python 2")))
    return out, folder_frameworks(per_folder)
