"""What a repository says about its stack: one :class:`Statement` per line that says something.

A statement is where (file, line, the text as written), what kind of source said it (a file pip
reads, a conda file, a Dockerfile's base image, a README sentence, ...), and the :class:`Fact` it
states. The decision (:mod:`envman.project.detect.decide`) weighs statements by their source's
:data:`STRENGTH` and marks each one used or set aside, with the reason.
"""

from __future__ import annotations

import re

from dataclasses import dataclass, field, replace
from typing import Any

#: Kinds of fact.
FRAMEWORK, CUDA, CUDNN, PYTHON, UNSUPPORTED, IMPORTS = "framework", "cuda", "cudnn", "python", "unsupported", "imports"

#: Kinds of source, strongest first. A file an installer reads (``pin`` for an exact version,
#: ``range`` otherwise) beats the base image a Dockerfile names, which beats an install command
#: written in a Dockerfile's RUN or a README, which beats a sentence of prose.
PIN, IMAGE, COMMAND, RANGE, PROSE = "pin", "image", "command", "range", "prose"
STRENGTH = {PIN: 5, IMAGE: 4, COMMAND: 3, RANGE: 2, PROSE: 1}

#: The frameworks envman builds stacks of.
BUILT = ("torch", "tensorflow", "jax", "onnxruntime")

#: Frameworks (and languages) no envman stack serves, as a user would name them.
UNSUPPORTED_NAMES = {
    "caffe": "Caffe",
    "caffe2": "Caffe2",
    "lua torch": "Lua Torch (Torch7)",
    "theano": "Theano",
    "mxnet": "MXNet",
    "chainer": "Chainer",
    "cntk": "CNTK",
    "paddle": "PaddlePaddle",
    "mindspore": "MindSpore",
    "mlx": "MLX",
    "jittor": "Jittor",
    "megengine": "MegEngine",
    "oneflow": "OneFlow",
    "python 2": "Python 2",
}


@dataclass(frozen=True)
class Fact:
    """One thing a statement says.

    ``kind`` is one of :data:`FRAMEWORK` (``framework`` with a PEP 440 ``spec``, empty when only
    named; ``gpu`` True/False when the package says which build), :data:`CUDA` and :data:`CUDNN`
    (``version``: ``"11.3"`` or a major alone, ``"11"``), :data:`PYTHON` (``spec``),
    :data:`UNSUPPORTED` (``framework``: a key of :data:`UNSUPPORTED_NAMES`) or :data:`IMPORTS`
    (``framework`` imported by ``count`` files)."""

    kind: str
    framework: str | None = None
    spec: str = ""
    version: str | None = None
    gpu: bool | None = None
    count: int = 0
    companion: str | None = None  # a pin that fixes the framework's release: ``torchvision==0.2.1``

    def means(self) -> str:
        """The fact in a few words: ``torch ==1.7.1``, ``CUDA 11.0``, ``Python >=3.8``."""
        if self.kind == FRAMEWORK and self.companion:
            return f"{self.framework} as {self.companion} needs it"
        if self.kind == FRAMEWORK:
            build = {True: " (GPU build)", False: " (CPU build)"}.get(self.gpu, "") if self.gpu is not None else ""
            return f"{self.framework} {self.spec}".rstrip() + build
        if self.kind == CUDA:
            whose = f" (of {self.framework})" if self.framework else ""
            return f"CUDA {self.spec}{self.version}{whose}" if self.version else "no CUDA (a CPU build)"
        if self.kind == CUDNN:
            return f"cuDNN {self.version}"
        if self.kind == PYTHON:
            return f"Python {self.spec}"
        if self.kind == UNSUPPORTED:
            return f"{UNSUPPORTED_NAMES.get(self.framework or '', self.framework)}, which envman does not build"
        return f"imports {self.framework} in {self.count} file{'s' if self.count != 1 else ''}"

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind}
        for key in ("framework", "spec", "version", "gpu", "companion"):
            value = getattr(self, key)
            if value not in (None, ""):
                d[key] = value
        if self.kind == IMPORTS:
            d["count"] = self.count
        return d


#: A bare CUDA selector of PyTorch's conda channel before 1.1 on a line (``cuda91``, not ``cuda91=``).
_SELECTOR_RE = re.compile(r"(?<![\w.=-])cuda(?:75|80|90|91|92|100)(?![\w.=-])")


@dataclass(frozen=True)
class Statement:
    """One line of the repository that states a :class:`Fact`."""

    file: str  # relative to the repository's root, "/"-separated
    line: int  # 1-based; 0 for a fact about many files (imports)
    text: str  # the line as written, clipped
    source: str  # which reader found it: "requirements", "conda", "setup.py", "dockerfile", "readme", ...
    strength: str  # one of STRENGTH
    fact: Fact
    used: bool | None = None  # decided later: used, or set aside
    why: str = ""  # why it was used or set aside
    notes: tuple[str, ...] = field(default=())
    #: (folder, framework) when the file sits in a top-level folder whose code imports that
    #: framework only: the statement speaks for that implementation, not for the repository
    scope: tuple[str, str] | None = None
    #: the file is one a README's install command names (``conda env create -f environment_b.yml``):
    #: among files of equal weight, the one the authors tell users to install
    named: bool = False

    @property
    def weight(self) -> int:
        return STRENGTH[self.strength]

    @property
    def hard(self) -> bool:
        """A pin: one that cannot be met ends detection. Install commands in a Dockerfile are
        pins; what a README says (even as a command), or a notebook installs (made for the machine
        it ran on, often Colab's), is never more than advice."""
        if self.fact.kind in (CUDA, PYTHON, CUDNN) and any(n.startswith("NGC ") for n in self.notes):
            return False  # an NGC image's CUDA and Python are NVIDIA's build's; the public wheels' may differ
        if self.fact.kind == CUDA and self.fact.framework == "torch" and _SELECTOR_RE.search(self.text):
            # PyTorch's old conda channel picked a build by a bare selector (cuda91) that its pip
            # wheels, which envman installs, may not have: a preference, not a pin
            return False
        return self.weight >= STRENGTH[COMMAND] and self.source not in ("readme", "notebook")

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def decided(self, used: bool, why: str) -> "Statement":
        return replace(self, used=used, why=why)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "text": self.text,
            "source": self.source,
            "strength": self.strength,
            "means": self.fact.means(),
            "fact": self.fact.to_json(),
            "used": bool(self.used),
            "why": self.why,
        }


def clip_text(text: str, limit: int = 160) -> str:
    """A line as evidence shows it: control characters made visible, at most ``limit`` characters."""
    # a character shows as one or more: the first limit + 1 decide (a line of a megabyte costs no more)
    shown = "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" if ord(ch) < 256 else f"\\u{ord(ch):04x}"
                    for ch in text.strip()[: limit + 1])
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"
