"""Stack names and ``Stack``, one resolved, fully pinned environment.

The name grammar (:func:`parse_name`) and the plain record :func:`envman.stack.resolve.resolve` returns,
with its JSON form. A module of its own, standard library only, so that code which only checks a
name or carries a stack (``envman run`` reads it back from its cache) loads neither the matrix
model nor the resolver.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from envman.errors import ResolveError, UserError, counted

# Names that reach an image's Dockerfile, its tags and labels, as patterns applied whole (with
# ``re.fullmatch``: with ``re.match`` a ``$`` also accepts a trailing newline, which would end a
# Dockerfile line). Text, not compiled: ``re`` compiles one the first time it is used. Checked
# where each value enters (the matrix, a project file) and again by the render.
#: A stack's canonical name (and a matrix row's).
STACK_NAME_PATTERN = r"[a-z0-9][a-z0-9._+-]{0,127}"
#: A project's name: its image repository, its HOME folder, its containers' label.
PROJECT_NAME_PATTERN = r"[a-z0-9][a-z0-9_.-]{0,62}"
#: A Debian package a project asks for, ``name`` or ``name=version``.
APT_PACKAGE_PATTERN = r"[a-z0-9][a-z0-9+.-]+(?:=[A-Za-z0-9.+:~_-]+)?"

#: nvidia/cuda image flavours, smallest first.
FLAVOURS = ("base", "runtime", "cudnn-runtime", "devel", "cudnn-devel")

ALIASES = {
    "torch": "torch",
    "pytorch": "torch",
    "tensorflow": "tensorflow",
    "tf": "tensorflow",
    "jax": "jax",
    "onnxruntime-gpu": "onnxruntime",
    "onnxruntime": "onnxruntime",
    "ort": "onnxruntime",
}

#: Platform part of a stack name → OCI platform. ``linux/amd64`` is the default and is never
#: written in a canonical name; ``linux/arm64`` is written ``-arm64``.
PLATFORM_WORDS = {
    "amd64": "linux/amd64",
    "x86_64": "linux/amd64",
    "arm64": "linux/arm64",
    "aarch64": "linux/arm64",
}
DEFAULT_PLATFORM = "linux/amd64"
#: The oldest Python that python-build-standalone provides: a stack's Python its OS does not
#: package must be at least this (resolve picks no other; render refuses one).
MIN_STANDALONE_PYTHON = "3.8"
PLATFORM_SUFFIX = {"linux/amd64": "", "linux/arm64": "-arm64"}

# Framework releases have up to four parts (JAX 0.9.0.1 is a re-release of 0.9.0).
_VERSION = r"[0-9]+(?:\.[0-9]+){0,3}"
_NAME_RE = re.compile(
    r"^(?P<fw>" + "|".join(sorted((re.escape(a) for a in ALIASES), key=len, reverse=True)) + r")"
    r"-(?P<ver>" + _VERSION + r")"
    r"(?:-(?:(?P<cpu>cpu)|cuda(?P<cuda>[0-9]+(?:\.[0-9]+)?)|cu(?P<cu>[0-9]{2,3})))?"
    r"(?:-py(?P<py>[0-9]\.[0-9]{1,2}t?))?"
    r"(?:-(?P<flavour>" + "|".join(sorted(FLAVOURS, key=len, reverse=True)) + r"))?"
    r"(?:-(?P<platform>" + "|".join(sorted(PLATFORM_WORDS, key=len, reverse=True)) + r"))?$"
)


#: The words of the grammar a typo is matched against, and the prefixes of its numbered parts.
_WORDS = (*ALIASES, *FLAVOURS, *PLATFORM_WORDS, "cpu")
_PREFIXES = ("cuda", "cu", "py")


def spelling_fixes(text: str, limit: int = 3) -> list[str]:
    """Names one misspelt word away from ``text`` that parse: a framework, flavour, platform or
    the ``cuda``/``py`` prefix of a number (``torhc-2.7-cuda12.8`` → ``torch-2.7-cuda12.8``,
    ``torch-2.7-cuda12.8-cudnn-rt`` → ``...-cudnn-runtime``), closest first."""
    import difflib

    if len(text) > 200:
        return []
    words = text.strip().lower().split("-")
    found: list[tuple[float, str]] = []
    for i in range(len(words)):
        for span in (1, 2):
            if i + span > len(words):
                continue
            part = "-".join(words[i:i + span])
            # every close word, not the closest few: a closer word that does not parse in this
            # place must not hide one that does (``limit`` applies to the names that parse)
            options = difflib.get_close_matches(part, _WORDS, n=len(_WORDS), cutoff=0.6)
            numbered = re.fullmatch(r"([a-z]+)([0-9][0-9.]*)", part)
            if numbered and span == 1:
                options += [p + numbered.group(2)
                            for p in difflib.get_close_matches(numbered.group(1), _PREFIXES, n=len(_PREFIXES), cutoff=0.5)]
            for w in options:
                cand = "-".join(words[:i] + [w] + words[i + span:])
                if cand != "-".join(words) and _NAME_RE.match(cand) and cand not in (c for _, c in found):
                    found.append((difflib.SequenceMatcher(None, part, w).ratio(), cand))
    return [c for _, c in sorted(found, key=lambda f: -f[0])][:limit]


def parse_platform(text: str) -> str:
    """``linux/arm64``, ``arm64`` or ``aarch64`` → ``linux/arm64`` (likewise amd64); ``UserError`` otherwise."""
    t = text.strip().lower()
    word = t[len("linux/"):] if t.startswith("linux/") else t
    if word not in PLATFORM_WORDS:
        raise UserError(
            f"unknown platform {text!r}",
            where="--platform",
            fix="use linux/amd64 or linux/arm64",
        )
    return PLATFORM_WORDS[word]


@dataclass(frozen=True)
class StackQuery:
    """A parsed stack name; ``None`` fields were left open by the user."""

    text: str
    framework: str
    version: str
    cpu: bool = False
    cuda: str | None = None
    python: str | None = None  # "3.14"; "3.14t" asks for the free-threaded build
    flavour: str | None = None
    platform: str | None = None  # "linux/arm64"...; None: not named (the default, linux/amd64)


#: The longest stack name read (the longest shipped one is about 60 characters).
MAX_NAME = 200


def parse_name(text: str) -> StackQuery:
    """Parse a stack name; raises ``ResolveError`` (exit 2) with the grammar on failure."""
    raw = text
    if len(text) > MAX_NAME:  # a version of thousands of digits would reach int() (its digit limit)
        raise ResolveError(f"stack name {text[:40]!r}… is {counted(len(text), 'character')} long, more than {MAX_NAME}",
                           fix="give a stack name such as torch-2.4-cuda12 (list them: envman matrix ls)")
    t = text.strip().lower()
    m = _NAME_RE.match(t)
    if not m:
        raise ResolveError(
            f"cannot parse stack name {raw!r}",
            fix="expected <framework>-<version>[-cuda<X.Y>|-cu<NNN>|-cpu][-py<X.Y>[t]][-<flavour>][-arm64|-amd64], "
            "e.g. torch-2.4-cuda12 or tf-2.15-cpu (list them: envman matrix ls)",
        )
    cuda = m.group("cuda")
    if m.group("cu"):
        digits = m.group("cu")
        cuda = f"{digits[:-1]}.{digits[-1]}"
    return StackQuery(
        text=raw,
        framework=ALIASES[m.group("fw")],
        version=m.group("ver"),
        cpu=bool(m.group("cpu")),
        cuda=cuda,
        python=m.group("py"),
        flavour=m.group("flavour"),
        platform=PLATFORM_WORDS[m.group("platform")] if m.group("platform") else None,
    )


@dataclass(frozen=True)
class Stack:
    """One resolved, fully pinned environment. Everything downstream takes a Stack."""

    name: str  # canonical: resolves to itself
    row: str  # the matrix row (framework build) name
    framework: str
    framework_version: str
    variant: str
    cuda: str | None
    cudnn: str | None
    python: str
    python_strategy: str  # "apt" (distro python3.X) or "standalone" (python-build-standalone via uv)
    os: str
    base_image: str
    base_image_status: str
    base_image_custom: bool
    flavour: str
    min_driver: str | None
    toolkit_driver: str | None
    minor_compat: bool
    minor_compat_status: str | None
    sass_archs: tuple[str, ...]
    ptx_archs: tuple[str, ...]
    arch_status: str
    packages: tuple[str, ...]
    index_url: str | None
    extra_index_url: str | None
    find_links: str | None
    sources: tuple[str, ...]
    status: str
    notes: tuple[str, ...] = field(default=())
    platform: str = DEFAULT_PLATFORM  # OCI platform the image is built for
    freethreaded: bool = False  # the free-threaded build of ``python`` (PEP 703; the name says py3.14t)
    #: The CUDA libraries installed before the framework, in a layer of their own (``name==version``,
    #: sorted; see :func:`envman.matrix.wheels.cuda_libraries`), each followed by
    #: `` --hash=sha256:HEX`` per wheel file where the row has hashes. Empty: none, and left out of
    #: the JSON, so that stacks without them keep their render hash.
    cuda_libs: tuple[str, ...] = ()
    #: ``""`` for a stack exactly as envman's shipped matrix gives it; else a digest of its content
    #: (``envman.stack.resolve.tag_key``): its stable tag is then ``latest-<key>``, so a row of a
    #: user's own matrix never takes the tag of a shipped stack or of another user's row. Not part
    #: of the stack's JSON (its labels, its render hash): it is derived from that content.
    tag_key: str = field(default="", compare=False)

    def to_json(self) -> dict[str, Any]:
        """JSON form. The default platform is left out, so that an amd64 stack's JSON (in the
        image's label and ``stack.json``) and therefore its render hash are what they were before
        stacks had platforms: images built earlier stay current."""
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = list(v)
        if d["platform"] == DEFAULT_PLATFORM:
            del d["platform"]
        if not d["freethreaded"]:  # likewise: stacks of a GIL build keep their JSON
            del d["freethreaded"]
        if not d["cuda_libs"]:  # likewise: stacks without a CUDA-library layer
            del d["cuda_libs"]
        del d["tag_key"]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Stack":
        fields = {f for f in cls.__dataclass_fields__}
        kw: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items() if k in fields}
        return cls(**kw)

    @property
    def interpreter(self) -> str:
        """The Python the stack runs, as uv and a name write it: ``3.12``, ``3.14t``."""
        return self.python + ("t" if self.freethreaded else "")

    @property
    def is_cpu(self) -> bool:
        return self.cuda is None


def nvidia_tag(stack: Stack) -> str | None:
    """The tag of the stack's base, when that base is an ``nvidia/cuda`` image."""
    repo, sep, tag = stack.base_image.rpartition(":")
    return tag if sep and repo in ("nvidia/cuda", "docker.io/nvidia/cuda") and not stack.base_image_custom else None


#: A variant as image tags, labels and the render's field rules carry it.
VARIANT_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}"


def row_name_problems(name: str, variant: str) -> list[str]:
    """Why a matrix row named ``name`` with ``variant`` could not be resolved or rendered (empty:
    it can): its name must parse as a stack name (a local version such as ``2.4.1+corp1`` does
    not) and its variant must fit an image tag. The loader refuses such a row, so ``matrix ls``
    and ``ci plan`` never list one that fails later at render."""
    problems = []
    try:
        parse_name(name)
    except ResolveError:
        problems.append(f"the row name {name[:80]!r} is not a stack name users can type (a local version such as "
                        "+corp1, or characters beyond letters, digits and .-)")
    if not re.fullmatch(VARIANT_PATTERN, variant):
        problems.append(f"variant {variant[:40]!r}{'…' if len(variant) > 40 else ''} is not 1-64 letters, digits or ._+-")
    return problems
