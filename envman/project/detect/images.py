"""What a Dockerfile says: its ``FROM`` images and the installs its ``RUN`` lines make.

Base images carry their stack in the name (``nvidia/cuda:10.0-cudnn7-devel-ubuntu18.04``,
``pytorch/pytorch:1.7.1-cuda11.0-cudnn8-runtime``, ``tensorflow/tensorflow:1.14.0-gpu-py3``,
``python:3.7-slim``); NVIDIA's NGC images (``nvcr.io/nvidia/pytorch:20.12-py3``) name only a
release, read against the matrix's NGC table. The file is read as Docker's parser reads it: line
continuations joined, ``ARG`` defaults and ``ENV`` values substituted in the lines after them, a ``FROM`` of an
earlier stage's name followed to nothing new.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Callable, Iterator

from packaging.version import InvalidVersion, Version

from envman.project.detect.facts import (
    COMMAND, CUDA, CUDNN, FRAMEWORK, IMAGE, PYTHON, UNSUPPORTED, Fact, Statement, clip_text,
)
from envman.project.detect.pins import index_cuda, openmmlab_index, requirement_facts
from envman.project.detect.repo import Repository

if TYPE_CHECKING:
    from envman.matrix.model import Matrix, NgcRelease


def logical_lines(text: str, *, continuation: str = "\\",
                  comment: Callable[[str], bool] = lambda line: line.lstrip().startswith("#")) -> Iterator[tuple[int, str]]:
    """(first line number, instruction) of a Dockerfile or a shell script, continuations joined
    (a line ending in ``continuation``), blank lines and ``comment`` lines dropped."""
    pending: list[str] = []
    start = 0
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if (not pending and not line.strip()) or comment(line):
            continue
        if not pending:
            start = no
        if line.endswith(continuation):
            pending.append(line[:-len(continuation)])
            continue
        pending.append(line)
        yield start, " ".join(p.strip() for p in pending)
        pending = []
    if pending:
        yield start, " ".join(p.strip() for p in pending)


#: What substitution may add to a line: values that refer to each other (``ENV B=$A$A``, then
#: ``ENV C=$B$B``...) cannot grow a line past it; a reference past it is left empty.
SUBSTITUTION_LIMIT = 4096


def substitute(text: str, args: dict[str, str]) -> str:
    """``${NAME}``, ``${NAME:-default}`` and ``$NAME`` filled from the ``ARG`` defaults and ``ENV``
    values seen so far, adding at most :data:`SUBSTITUTION_LIMIT` characters."""
    room = [SUBSTITUTION_LIMIT]

    def fill(m: re.Match[str]) -> str:
        value = args.get(m.group(1) or m.group(3), m.group(2) or "")
        if len(value) > room[0]:
            return ""
        room[0] -= len(value)
        return value

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)", fill, text)


def image_facts(ref: str, matrix: "Matrix | None") -> tuple[list[Fact], str]:
    """The facts an image reference states, and what it is (``"nvidia/cuda"``, ``"NGC pytorch
    20.12"``...) for the evidence's text; ([], "") for an image that says nothing of a stack."""
    ref = ref.strip()
    if len(ref) > 512 or re.search(r"[0-9]{13}", ref):
        return [], ""
    if "@" in ref:
        ref = ref.split("@", 1)[0]
    repo, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "latest")
    repo = repo.lower()
    for prefix in ("docker.io/", "index.docker.io/", "registry.hub.docker.com/"):
        if repo.startswith(prefix):
            repo = repo[len(prefix):]
    if repo.startswith("library/"):
        repo = repo[len("library/"):]
    tag_low = tag.lower()
    facts: list[Fact] = []
    if repo in ("nvidia/cuda", "nvidia/cudagl", "nvcr.io/nvidia/cuda"):
        m = re.match(r"([0-9]+\.[0-9]+)(?:\.[0-9]+)?", tag_low)
        if m:
            facts.append(Fact(CUDA, version=m.group(1)))
        m = re.search(r"cudnn([0-9]+)", tag_low)
        if m:
            facts.append(Fact(CUDNN, version=m.group(1)))
        return facts, "nvidia/cuda"
    if repo in ("pytorch/pytorch", "pytorch/manylinux-cuda"):
        m = re.match(r"([0-9]+\.[0-9]+(?:\.[0-9]+)?)", tag_low)
        if m:
            facts.append(Fact(FRAMEWORK, framework="torch", spec=f"=={m.group(1)}" if m.group(1).count(".") == 2 else f"=={m.group(1)}.*"))
        m = re.search(r"-cuda([0-9]+(?:\.[0-9]+)?)", tag_low)
        if m:
            facts.append(Fact(CUDA, version=m.group(1)))
        m = re.search(r"cudnn([0-9]+)", tag_low)
        if m:
            facts.append(Fact(CUDNN, version=m.group(1)))
        return facts, "PyTorch's image"
    if repo == "tensorflow/tensorflow":
        m = re.match(r"([0-9]+\.[0-9]+(?:\.[0-9]+)?)", tag_low)
        gpu = "gpu" in tag_low.split("-")
        if m:
            version = m.group(1)
            facts.append(Fact(FRAMEWORK, framework="tensorflow", gpu=gpu,
                              spec=f"=={version}" if version.count(".") == 2 else f"=={version}.*"))
        elif gpu:
            facts.append(Fact(FRAMEWORK, framework="tensorflow", gpu=True))
        return facts, "TensorFlow's image"
    if repo.startswith("nvcr.io/nvidia/") and matrix is not None:
        release = matrix.ngc_image(repo, tag)
        if release is None or release.framework_version is None:
            return ngc_between(matrix, repo, tag, release)
        facts.append(Fact(FRAMEWORK, framework=release.framework, gpu=True, spec=ngc_spec(release.framework_version)))
        if release.cuda is not None:
            # NVIDIA builds the framework against the image's CUDA; a wheel of the same release is
            # built for other CUDA minors of that major, which serve the code alike
            facts.append(Fact(CUDA, version=str(release.cuda.major)))
        if release.python is not None:
            facts.append(Fact(PYTHON, spec=f"=={release.python.major}.{release.python.minor}.*"))
        if release.cuda is None or release.python is None:
            # what the row does not give, the releases around it give where they agree
            around, _ = ngc_between(matrix, repo, tag, release)
            facts += [f for f in around if f.kind in (CUDA, PYTHON) and f not in facts]
        if release.cudnn:
            facts.append(Fact(CUDNN, version=release.cudnn))
        known = ", ".join(x for x in (f"{release.framework} {release.framework_version}" if release.framework_version else "",
                                      f"CUDA {release.cuda}" if release.cuda else "",
                                      f"Python {release.python}" if release.python else "") if x)
        status = "" if release.status == "confirmed" else f"; {release.status} in the matrix"
        return facts, f"NGC {release.repository.rsplit('/', 1)[-1]} {release.release}: {known or 'contents unknown'}{status}"
    if repo in ("python", "continuumio/miniconda3", "continuumio/anaconda3"):
        m = re.match(r"([0-9]+)\.([0-9]+)", tag_low)
        if repo == "python" and m:
            if m.group(1) == "2":

                return [Fact(UNSUPPORTED, framework="python 2")], "the Python image"
            facts.append(Fact(PYTHON, spec=f"=={m.group(1)}.{m.group(2)}.*"))
        return facts, "the Python image"
    return [], ""


#: NGC repositories → the framework they carry.
NGC_FRAMEWORKS = {"nvcr.io/nvidia/pytorch": "torch", "nvcr.io/nvidia/tensorflow": "tensorflow", "nvcr.io/nvidia/jax": "jax"}


def ngc_between(matrix: "Matrix", repository: str, tag: str, own: "NgcRelease | None" = None) -> tuple[list[Fact], str]:
    """What an NGC release whose framework version the table does not give carries, bounded by the
    releases around it that the table gives (the same repository, and for TensorFlow the same
    tf1/tf2 line): the framework between theirs; the CUDA major and Python of its own row where
    the table gives them (``own``), else those of the releases around it where both agree."""
    framework = NGC_FRAMEWORKS.get(repository)
    m = re.match(r"([0-9]{2}\.[0-9]{2})(?:-(tf1|tf2))?", tag)
    if framework is None or m is None:
        return [], ""
    release, line = m.group(1), m.group(2)
    known = sorted((r for r in matrix.ngc if r.repository == repository and r.public_release is not None
                    and (line is None or any(t.startswith(f"{r.release}-{line}") for t in r.tags))), key=lambda r: r.release)
    before = [r for r in known if r.release < release]  # never the release itself: its own row is ``own``
    after = [r for r in known if r.release > release]
    low, high = (before[-1] if before else None), (after[0] if after else None)
    if low is None and high is None:
        return [Fact(FRAMEWORK, framework=framework, gpu=True)] + _own_facts(own), \
            f"NGC {repository.rsplit('/', 1)[-1]} {tag}: contents unknown"
    parts = []
    if low is not None and low.public_release is not None:
        parts.append(f">={low.public_release.major}.{max(low.public_release.minor - (1 if _snapshot(low) else 0), 0)}")
    if high is not None and high.public_release is not None:
        parts.append(f"<{high.public_release.major}.{high.public_release.minor + 1}")
    facts = [Fact(FRAMEWORK, framework=framework, gpu=True, spec=",".join(parts))]
    pair = [r for r in (low, high) if r is not None]
    facts += _own_facts(own)
    if (own is None or own.cuda is None) and all(r.cuda is not None for r in pair) \
            and len({r.cuda.major for r in pair if r.cuda}) == 1 and pair[0].cuda:
        facts.append(Fact(CUDA, version=str(pair[0].cuda.major)))
    if (own is None or own.python is None) and all(r.python is not None for r in pair) \
            and len({r.python for r in pair}) == 1 and pair[0].python:
        facts.append(Fact(PYTHON, spec=f"=={pair[0].python.major}.{pair[0].python.minor}.*"))
    around = " and ".join(f"{r.release} ({r.framework} {r.framework_version})" for r in pair)
    return facts, f"NGC {repository.rsplit('/', 1)[-1]} {tag}: not in the matrix's table; read between {around}"


def _own_facts(own: "NgcRelease | None") -> list[Fact]:
    """The CUDA major and Python an NGC row gives beside an unknown framework version."""
    if own is None:
        return []
    return ([Fact(CUDA, version=str(own.cuda.major))] if own.cuda is not None else []) \
        + ([Fact(PYTHON, spec=f"=={own.python.major}.{own.python.minor}.*")] if own.python is not None else [])


def _snapshot(r: "NgcRelease") -> bool:

    return bool(r.framework_version) and Version(str(r.framework_version)).is_prerelease


def ngc_spec(version: str | None) -> str:
    """The public releases an NGC build's framework version stands for: a release with NVIDIA's
    local label (``2.3.0+cc6f2c7``, ``1.15.5+nv``) is that release's minor (``==2.3.*``); a
    development snapshot (``1.8.0a0+1606899``: between 1.7 and 1.8) is the minor before it or its own;
    a snapshot of a new major (``2.0.0a0``) is that major's first minor."""
    if not version:
        return ""

    try:
        v = Version(version)
    except InvalidVersion:
        return ""
    major, minor = v.release[0], (v.release[1] if len(v.release) > 1 else 0)
    if (v.is_prerelease or v.is_devrelease) and minor:
        return f">={major}.{minor - 1},<{major}.{minor + 1}"
    return f"=={major}.{minor}.*"


#: An install command inside a RUN line or a README's code block.
_PIP_RE = re.compile(r"(?:^|[\s;&|(])(?:python[0-9.]*\s+-m\s+)?pip[0-9.]*\s+install\s+(.*)")
_CONDA_RE = re.compile(r"(?:^|[\s;&|(])(?:conda|mamba|micromamba)\s+(?:install|create|env\s+create)\s+(.*)")


def command_facts(command: str) -> list[tuple[str, Fact]]:
    """(word, fact) of the installs one shell command makes: ``pip install torch==1.4.0
    torchvision==0.5.0 -f https://download.pytorch.org/whl/torch_stable.html``, ``conda install
    pytorch=1.7.1 cudatoolkit=11.0 -c pytorch``, ``conda create -n x python=3.7``."""
    from envman.project.detect.sources import conda_facts

    out: list[tuple[str, Fact]] = []
    for part in re.split(r"&&|\|\||;|\|", command):
        m = _PIP_RE.search(part)
        if m:
            words = _words(m.group(1))
            skip = False
            for i, w in enumerate(words):
                if skip:
                    skip = False
                    continue
                if w in ("-f", "--find-links", "-i", "--index-url", "--extra-index-url"):
                    if i + 1 < len(words) and (fact := index_cuda(words[i + 1])) is not None:
                        out.append((f"{w} {words[i + 1]}", fact))
                    elif i + 1 < len(words):
                        out += [(f"{w} {words[i + 1]}", f) for f in openmmlab_index(words[i + 1])]
                    skip = True
                    continue
                if w.startswith("-"):
                    if w in ("-r", "-c", "-e", "--requirement", "--constraint", "--target", "-t", "--prefix"):
                        skip = True
                    continue
                out += [(w, f) for f in requirement_facts(w)]
            continue
        m = _CONDA_RE.search(part)
        if m:
            words = _words(m.group(1))
            skip = False
            for w in words:
                if skip:
                    skip = False
                    continue
                if w.startswith("-"):
                    if w in ("-c", "--channel", "-n", "--name", "-p", "--prefix", "-f", "--file"):
                        skip = True
                    continue
                out += [(w, f) for f in conda_facts(w)]
    return out


#: The longest word read of a command: a requirement, URL or option is far shorter, and shlex
#: builds a word a character at a time, in time quadratic in its length.
MAX_WORD = 4096
#: A run of more than MAX_WORD non-blank characters, matched from its start only (linear time).
_LONG_WORD_RE = re.compile(r"(?<!\S)\S{%d,}" % (MAX_WORD + 1))


def _words(text: str) -> list[str]:
    text = _LONG_WORD_RE.sub("", text)
    try:
        return shlex.split(text, comments=True)
    except ValueError:
        return text.split()


def _env_values(rest: str) -> dict[str, str]:
    """The variables one ``ENV`` instruction sets: ``NAME=value ...``, or the older ``NAME value``
    (one variable, the rest of the line its value)."""
    words = _words(rest)
    if not words:
        return {}
    if "=" not in words[0]:
        name, value = words[0], " ".join(words[1:])
        return {name: value} if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else {}
    out = {}
    for w in words:
        name, eq, value = w.partition("=")
        if eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            out[name] = value
    return out


def read_dockerfile(repo: Repository, rel: str, matrix: "Matrix | None") -> list[Statement]:
    text = repo.read(rel)
    if text is None:
        return []
    out: list[Statement] = []
    args: dict[str, str] = {}
    stages: set[str] = set()
    last_from: list[Statement] = []
    for no, instr in logical_lines(text):
        word, _, rest = instr.partition(" ")
        kind = word.upper()
        if kind == "ARG":
            for a in rest.split():
                name, eq, value = a.partition("=")
                if eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                    args.setdefault(name, value.strip("'\""))
        elif kind == "FROM":
            words = [w for w in rest.split() if not w.startswith("--")]
            if not words:
                continue
            ref = substitute(words[0], args)
            if len(words) >= 3 and words[1].lower() == "as":
                stages.add(words[2].lower())
            if ref.lower() in stages:
                continue
            facts, what = image_facts(ref, matrix)
            last_from = [Statement(rel, no, clip_text(instr), "dockerfile", IMAGE, f,
                                   notes=(what,) if what else ()) for f in facts]
            out += last_from
        elif kind == "RUN":
            for w, f in command_facts(substitute(rest, args)):
                out.append(Statement(rel, no, clip_text(instr), "dockerfile", COMMAND, f, notes=(w,)))
        elif kind == "ENV":
            rest = substitute(rest, args)
            args.update(_env_values(rest))  # a later RUN line's shell sees them: ``torch==${PYTORCH_VERSION}``
            m = re.search(r"PYTHON_VERSION[= ]+[\"']?([0-9]+)\.([0-9]+)", rest)
            if m and m.group(1) == "3":
                out.append(Statement(rel, no, clip_text(instr), "dockerfile", COMMAND,
                                     Fact(PYTHON, spec=f"=={m.group(1)}.{m.group(2)}.*")))
    return out


#: Compose files (``docker-compose.yml``, ``compose.yaml``, ``docker/docker-compose.gpu.yml``), at
#: most two folders down.
COMPOSE = r"(?:[^/]+/){0,2}(?:docker-)?compose[^/]*\.ya?ml"
_COMPOSE_IMAGE_RE = re.compile(r"""^\s*(?:-\s+)?image\s*:\s*["']?([^"'\s#]+)["']?\s*(?:#.*)?$""")


def read_compose(repo: Repository, rel: str, matrix: "Matrix | None") -> list[Statement]:
    """The images a compose file's services run (``image: nvcr.io/nvidia/pytorch:21.08-py3``): they
    speak as a Dockerfile's ``FROM`` does. ``${VAR:-default}`` takes its default; a reference made
    of another variable gives nothing. A service built from a Dockerfile is read from that file."""
    text = repo.read(rel)
    if text is None:
        return []
    out: list[Statement] = []
    for no, raw in enumerate(text.splitlines(), 1):
        m = _COMPOSE_IMAGE_RE.match(raw)
        if not m:
            continue
        ref = substitute(m.group(1), {})
        if not ref or "$" in ref:
            continue
        facts, what = image_facts(ref, matrix)
        out += [Statement(rel, no, clip_text(raw.strip()), "compose", IMAGE, f, notes=(what,) if what else ()) for f in facts]
    return out
