"""Which framework the code really uses: imports counted in ``*.py`` files (by pattern, nothing
imported or run), Lua Torch's ``require 'torch'`` in ``*.lua`` files, Caffe's ``*.prototxt``, and
code that only Python 2 parses."""

from __future__ import annotations

import re
from collections import Counter

from envman.project.detect.facts import IMPORTS, RANGE, UNSUPPORTED, Fact, Statement
from envman.project.detect.repo import CODE_LIMIT, MAX_CODE_FILES, Repository

#: Top-level modules → the framework (or unsupported framework) they belong to.
MODULES = {
    "torch": "torch", "torchvision": "torch", "torchaudio": "torch", "pytorch_lightning": "torch", "lightning": "torch",
    "tensorflow": "tensorflow", "keras": "tensorflow", "tf_keras": "tensorflow", "tensorflow_addons": "tensorflow",
    "jax": "jax", "jaxlib": "jax", "flax": "jax", "haiku": "jax", "optax": "jax", "equinox": "jax", "objax": "jax",
    "onnxruntime": "onnxruntime",
    "caffe": "caffe", "theano": "theano", "lasagne": "theano", "mxnet": "mxnet", "gluon": "mxnet",
    "chainer": "chainer", "cntk": "cntk", "paddle": "paddle",
}
_IMPORT_RE = re.compile(r"^[ \t]*(?:import|from)[ \t]+(" + "|".join(sorted(MODULES, key=len, reverse=True)) + r")\b",
                        re.MULTILINE)
_PY2_RE = re.compile(r"^[ \t]*(?:print[ \t]+(?![=(\[.,)])[^\s]|print[ \t]*>>|except[ \t]+[\w.]+[ \t]*,[ \t]*\w+[ \t]*:|exec[ \t]+[\"'])",
                     re.MULTILINE)
_LUA_RE = re.compile(r"require\s*\(?\s*['\"](torch|nn|cutorch|cunn|cudnn|optim|nngraph)['\"]")


def read_code(repo: Repository) -> list[Statement]:
    """One statement per framework the code imports (how many files), and one for Lua Torch,
    Caffe model files, or Python 2 code when the repository is mostly that."""
    counts: Counter[str] = Counter()
    examples: dict[str, str] = {}
    py_files = [f for f in repo.files if f.endswith(".py")][:MAX_CODE_FILES]
    py2 = 0
    framework_files = 0
    for rel in py_files:
        text = repo.head(rel, CODE_LIMIT)
        if text is None:
            continue
        found = {MODULES[m] for m in _IMPORT_RE.findall(text)}
        for fw in found:
            counts[fw] += 1
            examples.setdefault(fw, rel)
        if found:
            framework_files += 1
        if "print_function" not in text and _PY2_RE.search(text):
            py2 += 1
    lua = 0
    for rel in [f for f in repo.files if f.endswith(".lua")][:MAX_CODE_FILES]:
        text = repo.head(rel, CODE_LIMIT)
        if text and _LUA_RE.search(text):
            lua += 1
            examples.setdefault("lua torch", rel)
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
    checked = max(framework_files, 1) if framework_files else len(py_files)
    if py2 and py2 * 2 >= checked and py2 >= min(3, len(py_files)):
        out.append(Statement("*.py", 0, f"{py2} of {len(py_files)} Python files use Python 2 syntax (print statements, "
                             "'except E, e')", "imports", RANGE, Fact(UNSUPPORTED, framework="python 2")))
    return out
