"""Readers of the files that pin a repository's stack, each with the ecosystem's own grammar:
requirements files (pip's line rules, ``-r`` includes inside the repository), conda environment
files (YAML, conda's match specs), ``pyproject.toml`` (PEP 621 and Poetry), ``Pipfile``, ``.python-version`` and ``runtime.txt``.

``setup.py`` and ``setup.cfg`` are read by :mod:`envman.project.detect.setupfiles`.

Each reader returns :class:`~envman.project.detect.facts.Statement` s; a file it cannot parse
gives none (detection reads what it can and says what it used).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import replace
from typing import Any, Callable, Iterable

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from envman.project.detect.facts import (
    COMMAND, CUDA, CUDNN, FRAMEWORK, PIN, PYTHON, RANGE, UNSUPPORTED, Fact, Statement, clip_text,
)
from envman.project.detect.pins import (
    cuda_of_tag, exact_version, index_cuda, named_facts, requirement_facts, spec_text,
)
from envman.project.detect.repo import Repository

#: ``-r``/``-c`` includes followed at most this deep.
MAX_INCLUDE_DEPTH = 8


def _strength(fact: Fact) -> str:
    if fact.kind == FRAMEWORK:
        return PIN if exact_version(fact.spec) or fact.companion else RANGE
    if fact.kind == PYTHON:
        return PIN if exact_version(fact.spec) or re.fullmatch(r"==[0-9]+\.[0-9]+\.\*", fact.spec) else RANGE
    return PIN


def declared_python(file: str, line: int, text: str, source: str, spec: str) -> list[Statement]:
    """The Python a package declares it supports (``requires-python``, Poetry's ``python``,
    ``python_requires``): pip refuses to install the package into any other, so even a range
    weighs like an install command (an exact one is a pin), above a Python that a Dockerfile or
    script of the repository merely creates."""
    fact = Fact(PYTHON, spec=spec)
    return statements(file, line, text, source, [fact], PIN if _strength(fact) == PIN else COMMAND)


def statements(file: str, line: int, text: str, source: str, facts: Iterable[Fact], strength: str | None = None) -> list[Statement]:
    """One statement per fact of a line; a fact whose version has a part of 13 digits or more
    (no release has one) is no fact."""
    return [Statement(file, line, clip_text(text), source, strength or _strength(f), f) for f in facts
            if not re.search(r"[0-9]{13}", f"{f.spec}{f.version or ''}{f.companion or ''}")]


# --------------------------------------------------------------------------- requirements files


#: pip's option words that name another file or an index (short and long forms).
_INCLUDE = ("-r", "--requirement", "-c", "--constraint")
_INDEX = ("-i", "--index-url", "--extra-index-url", "-f", "--find-links")


def split_option(line: str) -> tuple[str, str] | None:
    """``("-r", "base.txt")`` for ``-r base.txt``, ``-rbase.txt`` or ``--requirement=base.txt``;
    ``None`` for a line that is no include or index option."""
    for opt in (*_INCLUDE, *_INDEX):
        if line == opt:
            return None
        if line.startswith(opt + " ") or line.startswith(opt + "="):
            return opt, line[len(opt) + 1:].strip()
        if len(opt) == 2 and line.startswith(opt) and not line.startswith(opt + "-"):
            return opt, line[2:].strip()
    return None


def requirement_text(line: str) -> str:
    """A requirements line without pip's per-line options (``--hash=...``)."""
    return re.split(r"\s+--?[A-Za-z]", " " + line, maxsplit=1)[0].strip()


def read_requirements(repo: Repository, rel: str, *, source: str = "requirements", depth: int = 0,
                      seen: set[str] | None = None) -> list[Statement]:
    """The statements of a requirements file and of the files it includes (inside the repository)."""
    from envman.project.requirements import requirement_lines

    seen = set() if seen is None else seen
    if rel in seen or depth > MAX_INCLUDE_DEPTH:
        return []
    seen.add(rel)
    text = repo.read(rel)
    if text is None:
        return []
    out: list[Statement] = []
    numbered = line_numbers(text)
    for logical in requirement_lines(text):
        line_no = numbered(logical)
        option = split_option(logical)
        if option is not None:
            opt, value = option
            if opt in _INCLUDE:
                target = relative_path(rel, value)
                if target is not None:
                    out += read_requirements(repo, target, source=source, depth=depth + 1, seen=seen)
            elif (fact := index_cuda(value)) is not None:
                out += statements(rel, line_no, logical, source, [fact], PIN)
            continue
        if logical.startswith("-"):
            continue
        out += statements(rel, line_no, logical, source, requirement_facts(requirement_text(logical)))
    return out


def relative_path(base: str, target: str) -> str | None:
    """``target`` (as an include names it) relative to the repository root, or None when it leads
    outside it or is no plain path."""

    target = target.strip().strip("'\"")
    if not target or "://" in target or target.startswith(("/", "~")) or "\0" in target:
        return None
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(base), target))
    return None if joined.startswith("..") or joined == "." else joined


#: ``name =`` or ``"name" =`` at a line's start: a TOML key (Poetry, Pipfile, pyproject tables).
_KEY_RE = re.compile(r"""["']?([A-Za-z0-9_.-]+)["']?\s*=(?!=)""")


def line_numbers(text: str) -> Callable[..., int]:
    """A function from a logical line (or an entry of a manifest) to the 1-based number of the
    first physical line that starts with its first 40 (30, 20, 10) characters, else the first line
    whose first word is its first word (0 when none): built once, each answer a lookup, so a file
    of many lines costs time linear in its size."""
    starts: dict[str, int] = {}
    heads: dict[str, int] = {}
    keys: dict[str, int] = {}
    for i, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        key = _KEY_RE.match(stripped)
        if key:
            keys.setdefault(key.group(1).lower(), i)
        for n in (40, 30, 20, 10):
            if len(stripped) >= n:
                starts.setdefault(stripped[:n], i)
        starts.setdefault(stripped, i)
        words = stripped.split(maxsplit=1)
        if words:
            for w in (words[0], words[0].split("=")[0].strip("'\"[]-,")):
                if w:
                    heads.setdefault(w, i)

    lines = text.splitlines()
    searches = [200]  # entries found only inside a line (``export = pkg==1``) are looked for this many times

    def number(part: str, *, key: bool = False) -> int:
        """``key=True``: ``part`` is a TOML key (``tensorflow``, not ``tensorflow-io``)."""
        probe = part.strip()
        if key and probe.lower() in keys:
            return keys[probe.lower()]
        for n in (40, 30, 20, 10):
            if len(probe) >= n and probe[:n] in starts:
                return starts[probe[:n]]
        if probe in starts:
            return starts[probe]
        words = probe.split(maxsplit=1)
        head = words[0] if words else ""
        found = heads.get(head)
        if found or not probe:
            return found or 0
        if searches[0] > 0:  # the line that holds the entry itself, before one that only starts alike
            searches[0] -= 1
            inside = next((i for i, line in enumerate(lines, 1) if probe[:40] in line), 0)
            if inside:
                return inside
        return heads.get(head.split("=")[0].strip("'\"[]-,")) or 0

    return number


# --------------------------------------------------------------------------- conda


#: conda packages that name the CUDA toolkit a conda environment installs.
CONDA_CUDA = ("cudatoolkit", "cudatoolkit-dev", "pytorch-cuda", "cuda-version", "cuda-toolkit", "cuda", "cuda-runtime",
              "cuda-cudart", "cuda-nvcc")


#: The CUDA selectors of PyTorch's conda channel before 1.1: ``conda install pytorch=0.4.1 cuda92 -c
#: pytorch`` (a bare package, no version, that picked the build of that CUDA).
CONDA_TORCH_CUDA_SELECTOR = re.compile(r"cuda(75|80|90|91|92|100)")


def conda_spec(text: str) -> tuple[str, str, str] | None:
    if len(text) > 1024 or re.search(r"[0-9]{13}", text):
        return None
    return _conda_spec(text)


def _conda_spec(text: str) -> tuple[str, str, str] | None:
    """(name, PEP 440 specifier, build) of a conda match spec: ``pytorch=1.7.1=py3.8_cuda11.0_0``,
    ``pytorch==1.7.1``, ``conda-forge::cudatoolkit=11.1``, ``python>=3.8``, ``pytorch 1.7.1 py3.8*``,
    ``pytorch[version='>=1.6']``. conda's ``=1.7`` is ``1.7.*``; ``=1.7.1`` is taken as exact."""
    text = text.strip()
    if "::" in text:
        text = text.split("::", 1)[1]
    m = re.fullmatch(r"([A-Za-z0-9_][A-Za-z0-9_.-]*)\s*\[\s*version\s*=\s*['\"]([^'\"]*)['\"]\s*\]", text)
    if m:
        name, rest = m.group(1), m.group(2)
    else:
        m = re.fullmatch(r"([A-Za-z0-9_][A-Za-z0-9_.-]*)\s*(.*)", text)
        if not m:
            return None
        name, rest = m.group(1), m.group(2).strip()
    build = ""
    spec = ""
    if rest.startswith("==") or rest.startswith("=") or re.match(r"[0-9]", rest):
        exact = rest.startswith("==")
        body = rest.lstrip("=").strip()
        parts = re.split(r"[=\s]+", body, maxsplit=1)
        version = parts[0]
        build = parts[1] if len(parts) > 1 else ""
        if version and version != "*":
            wild = version.endswith("*")
            version = version.rstrip("*").rstrip(".")
            if not re.fullmatch(r"[0-9]+(\.[0-9A-Za-z]+)*", version):
                spec = ""
            elif exact or (not wild and version.count(".") >= 2):
                spec = f"=={version}"
            else:
                spec = f"=={version}.*"
    elif rest:
        spec = ",".join(p.strip() for p in rest.split(",") if p.strip())
        spec = spec.split()[0] if spec else ""
    return name.lower(), spec, build


def conda_facts(text: str) -> list[Fact]:
    """The facts one conda dependency states."""
    parsed = conda_spec(text)
    if parsed is None:
        return []
    name, spec, build = parsed
    facts: list[Fact] = []
    if name in CONDA_CUDA:
        version = exact_version(spec) or _prefix(spec)
        if version:
            # pytorch-cuda is PyTorch's own: the CUDA of torch, not of a JAX repository that has torch beside it
            facts.append(Fact(CUDA, version=".".join(version.split(".")[:2]), framework="torch" if name == "pytorch-cuda" else None))
        return facts
    if CONDA_TORCH_CUDA_SELECTOR.fullmatch(name) and not spec:
        return [Fact(CUDA, version=cuda_of_tag(name), framework="torch")]
    if name == "cudnn":
        version = exact_version(spec) or _prefix(spec)
        return [Fact(CUDNN, version=version)] if version else []
    if name == "cpuonly":
        return [Fact(CUDA, version=None)]
    if name == "python":
        return [Fact(PYTHON, spec=spec)] if spec else []
    if name in ("python2", "python3"):
        return []
    facts += list(named_facts(name, spec))
    if build and any(f.kind == FRAMEWORK for f in facts):
        low = build.lower()
        cuda = re.search(r"cuda([0-9]+\.[0-9]+|[0-9]{2,3})", low)
        if cuda:
            facts.append(Fact(CUDA, version=cuda.group(1) if "." in cuda.group(1) else cuda_of_tag("cuda" + cuda.group(1))))
        elif re.search(r"(^|_)cpu", low):
            facts.append(Fact(CUDA, version=None))
    return facts


def _prefix(spec: str) -> str | None:
    m = re.fullmatch(r"==([0-9]+(?:\.[0-9]+)*)\.\*", spec)
    return m.group(1) if m else None


def read_conda(repo: Repository, rel: str) -> list[Statement]:
    """The statements of a conda environment file: its ``dependencies``, the pip list inside it
    included (read by :func:`conda_document`)."""
    doc = conda_document(repo, rel)
    if doc is None:
        return []
    lines = (repo.read(rel) or "").splitlines()

    def shown(no: int, value: str) -> str:
        return lines[no - 1] if 0 < no <= len(lines) else value

    out: list[Statement] = []
    for item in doc["dependencies"]:
        if not isinstance(item, dict):
            no, value = item
            out += statements(rel, no, shown(no, value), "conda", conda_facts(value))
            continue
        for no, value in item["pip"]:
            word = value.strip()
            found = split_option(word)
            if found and found[0] in _INDEX and (fact := index_cuda(found[1])) is not None:
                out += statements(rel, no, shown(no, value), "conda", [fact], PIN)
            elif not word.startswith("-"):
                out += statements(rel, no, shown(no, value), "conda", requirement_facts(requirement_text(word)))
    return out


#: Package lists ``conda create --file FILE`` reads (``conda list --export`` and ``--explicit``
#: write them: ``spec-file.txt``, ``conda_packagelist.txt``, ``package-list.txt``); a requirements
#: file written by ``conda list --export`` is read for such lines too.
CONDA_LISTS = r"(?:[^/]+/)?[^/]*(?:conda|package|spec|environment|env)[^/]*\.txt"
#: ``--explicit``: a package file's URL, ``name-version-build.tar.bz2`` (or ``.conda``).
_EXPLICIT_RE = re.compile(r"^(?:https?|file)://\S+/([A-Za-z0-9_.+-]+)-([^-/\s]+)-([^-/\s]+)\.(?:tar\.bz2|conda)(?:#[0-9a-f]+)?$")
#: ``--export``: ``name=version=build``.
_EXPORT_RE = re.compile(r"^([A-Za-z0-9_.-]+)=([^=\s]+)=([^=\s]+)$")


def read_conda_list(repo: Repository, rel: str) -> list[Statement]:
    """The statements of a conda package list: each ``name=version=build`` line, or each package
    URL of an ``@EXPLICIT`` list, as conda installs it: exactly that build (so the build string's
    CUDA counts: ``pytorch-0.4.0-py36_cuda8.0.61_cudnn7.1.2_1``). Other lines give nothing."""
    text = repo.read(rel)
    if text is None:
        return []
    out: list[Statement] = []
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if len(line) > 1000:  # no package URL is this long; the patterns then stay quick
            continue
        m = _EXPLICIT_RE.match(line) or _EXPORT_RE.match(line)
        if m:
            name, version, build = m.groups()
            out += statements(rel, no, line, "conda", conda_facts(f"{name}={version}={build}"))
    return out


#: Bytes of a conda environment file composed as YAML (a few KiB in practice; ``conda env export``
#: of hundreds of packages stays far below): YAML is read at a few MB a second, and a repository
#: may hold many such files of the manifest limit.
CONDA_LIMIT = 128 * 1024
#: YAML files near the root (shallowest first) looked at for a conda environment by content, when
#: their name does not say so (``Project_GPU.yml``).
MAX_YAML = 64
#: Conda environment files read by their name (environment.yml, at most two folders down).
MAX_CONDA = 64
#: A conda environment's top level: a ``dependencies`` list beside its ``name`` or ``channels``.
_CONDA_DEPENDENCIES_RE = re.compile(r"^dependencies[ \t]*:", re.M)
_CONDA_NAME_RE = re.compile(r"^(?:name|channels)[ \t]*:", re.M)


def conda_environment(repo: Repository, rel: str) -> bool:
    """Whether the YAML file ``rel`` is a conda environment by its content: top-level
    ``dependencies`` and ``name`` or ``channels`` keys (what ``conda env create -f`` reads)."""
    text = repo.read(rel)
    return text is not None and bool(_CONDA_DEPENDENCIES_RE.search(text)) and bool(_CONDA_NAME_RE.search(text))


def conda_document(repo: Repository, rel: str) -> dict[str, Any] | None:
    """A conda file's ``dependencies`` as (line number, text) pairs, its ``pip`` list as
    ``{"pip": [(line number, text), ...]}``. The YAML is composed into nodes (safe: no tag is
    constructed) and only the ``dependencies`` sequence is walked, so aliases and deep nesting
    cost nothing."""
    import yaml

    text = repo.read(rel, limit=CONDA_LIMIT)
    if text is None:
        return None
    try:
        root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (yaml.YAMLError, RecursionError, ValueError):
        return None
    if not isinstance(root, yaml.MappingNode):
        return None
    deps: list[Any] = []
    for key, value in root.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "dependencies" and isinstance(value, yaml.SequenceNode):
            for item in value.value[:2000]:
                if isinstance(item, yaml.ScalarNode):
                    deps.append((item.start_mark.line + 1, str(item.value)))
                elif isinstance(item, yaml.MappingNode):
                    for k, v in item.value:
                        if isinstance(k, yaml.ScalarNode) and k.value == "pip" and isinstance(v, yaml.SequenceNode):
                            deps.append({"pip": [(r.start_mark.line + 1, str(r.value)) for r in v.value[:2000]
                                                 if isinstance(r, yaml.ScalarNode)]})
    return {"dependencies": deps}


def python_spec(text: str) -> str:
    """A Python requirement as a specifier (``3.8`` means ``==3.8.*``); ``""`` when it is none."""


    t = text.strip()
    if re.fullmatch(r"[0-9]+(\.[0-9]+){0,2}", t):
        return "==" + t + (".*" if t.count(".") < 2 else "")
    try:
        return spec_text(SpecifierSet(t))
    except InvalidSpecifier:
        return ""


# --------------------------------------------------------------------------- pyproject / Pipfile


def _poetry_spec(value: Any) -> str:
    """A Poetry constraint as PEP 440: ``^1.2`` → ``>=1.2,<2.0``, ``~1.2`` → ``>=1.2,<1.3``,
    ``1.2.3`` → ``==1.2.3``, ``*`` → nothing."""
    if isinstance(value, dict):
        value = value.get("version", "")
    if not isinstance(value, str):
        return ""
    parts = []
    for piece in value.split(","):
        p = piece.strip()
        if not p or p == "*" or re.search(r"[0-9]{13}", p):
            continue
        m = re.fullmatch(r"([\^~])\s*([0-9]+)(?:\.([0-9]+))?(?:\.([0-9]+))?", p)
        if m:
            op, major, minor, patch = m.group(1), int(m.group(2)), m.group(3), m.group(4)
            low = ".".join(x for x in (str(major), minor, patch) if x is not None)
            if op == "^":
                if major > 0 or minor is None:
                    high = f"{major + 1}.0"
                elif int(minor) > 0 or patch is None:
                    high = f"0.{int(minor) + 1}"
                else:
                    high = f"0.0.{int(patch) + 1}"
            else:
                high = f"{major}.{int(minor) + 1}" if minor is not None else f"{major + 1}.0"
            parts += [f">={low}", f"<{high}"]
        elif re.fullmatch(r"[0-9]+(\.[0-9]+)*(\.\*)?", p):
            parts.append(f"=={p}")
        else:
            parts.append(p.replace(" ", ""))
    return ",".join(parts)


def _toml(repo: Repository, rel: str) -> tuple[dict[str, Any], Callable[..., int]] | None:
    """``rel`` parsed as TOML, with its :func:`line_numbers`; ``None`` when it cannot be read or parsed."""
    from envman.safefile import toml_module

    text = repo.read(rel)
    if text is None:
        return None
    try:
        return toml_module().loads(text), line_numbers(text)
    except (ValueError, RecursionError):
        return None


def read_pyproject(repo: Repository, rel: str) -> list[Statement]:
    parsed = _toml(repo, rel)
    if parsed is None:
        return []
    doc, number = parsed
    out: list[Statement] = []
    project: dict[str, Any] = doc["project"] if isinstance(doc.get("project"), dict) else {}
    for req in _strs(project.get("dependencies")):
        out += statements(rel, number(req), req, "pyproject", requirement_facts(req))
    extras = project.get("optional-dependencies")
    if isinstance(extras, dict):
        for reqs in extras.values():
            for req in _strs(reqs):
                out += statements(rel, number(req), req, "pyproject", requirement_facts(req), RANGE)
    py = project.get("requires-python")
    if isinstance(py, str):
        out += declared_python(rel, number("requires-python", key=True), f"requires-python = {py!r}", "pyproject", python_spec(py))
    tool: dict[str, Any] = doc["tool"] if isinstance(doc.get("tool"), dict) else {}
    poetry: dict[str, Any] = tool["poetry"] if isinstance(tool.get("poetry"), dict) else {}
    tables = [poetry.get("dependencies")]
    groups = poetry.get("group")
    if isinstance(groups, dict):
        tables += [g.get("dependencies") for g in groups.values() if isinstance(g, dict)]
    for table in tables:
        if not isinstance(table, dict):
            continue
        for name, value in table.items():
            if not isinstance(name, str):
                continue
            entries = value if isinstance(value, list) else [value]
            for entry in entries[:16]:
                spec = _poetry_spec(entry)
                shown = f"{name} = {entry!r}"
                if name.lower() == "python":
                    if spec:
                        out += declared_python(rel, number("python", key=True), shown, "pyproject", spec)
                    continue
                extras_ = set(entry.get("extras", [])) if isinstance(entry, dict) and isinstance(entry.get("extras"), list) else set()
                out += statements(rel, number(name, key=True), shown, "pyproject", named_facts(name, spec, {str(e) for e in extras_}))
    for src in _sources(tool):
        if (fact := index_cuda(src)) is not None:
            out += statements(rel, number(src), src, "pyproject", [fact], PIN)
    return out


def _sources(tool: dict[str, Any]) -> list[str]:
    """Index URLs a pyproject names for Poetry (``[[tool.poetry.source]]``) or uv (``[[tool.uv.index]]``)."""
    urls = []
    for table in (tool.get("poetry", {}).get("source") if isinstance(tool.get("poetry"), dict) else None,
                  tool.get("uv", {}).get("index") if isinstance(tool.get("uv"), dict) else None):
        if isinstance(table, list):
            urls += [t["url"] for t in table if isinstance(t, dict) and isinstance(t.get("url"), str)]
    return urls


def _strs(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)][:2000] if isinstance(value, list) else []


def read_pipfile(repo: Repository, rel: str) -> list[Statement]:
    parsed = _toml(repo, rel)
    if parsed is None:
        return []
    doc, number = parsed
    out: list[Statement] = []
    for section in ("packages", "dev-packages"):
        table = doc.get(section)
        if not isinstance(table, dict):
            continue
        for name, value in table.items():
            spec = value if isinstance(value, str) else value.get("version", "") if isinstance(value, dict) else ""
            spec = "" if not isinstance(spec, str) or spec == "*" else spec
            out += statements(rel, number(name, key=True), f"{name} = {value!r}", "Pipfile",
                              named_facts(name, spec), None if section == "packages" else RANGE)
    requires = doc.get("requires")
    if isinstance(requires, dict):
        for key in ("python_version", "python_full_version"):
            if isinstance(requires.get(key), str):
                out += statements(rel, number(key, key=True), f"{key} = {requires[key]!r}", "Pipfile",
                                  [Fact(PYTHON, spec=python_spec(requires[key]))])
    for src in doc.get("source", []) if isinstance(doc.get("source"), list) else []:
        if isinstance(src, dict) and isinstance(src.get("url"), str) and (fact := index_cuda(src["url"])) is not None:
            out += statements(rel, number(src["url"]), src["url"], "Pipfile", [fact], PIN)
    return out


# --------------------------------------------------------------------------- .python-version / runtime.txt


def read_python_version(repo: Repository, rel: str) -> list[Statement]:
    """``.python-version`` (pyenv: ``3.8.10``, ``3.8``) and ``runtime.txt`` (``python-3.7.3``)."""
    text = repo.read(rel, limit=4096)
    if text is None:
        return []
    for no, line in enumerate(text.splitlines(), 1):
        word = line.split("#")[0].strip()
        if not word:
            continue
        m = re.fullmatch(r"(?:python-?|cpython-?)?([0-9]+)\.([0-9]+)(?:\.[0-9]+)?", word, re.IGNORECASE)
        if m:
            if m.group(1) == "2":
                return statements(rel, no, line, rel.rsplit("/", 1)[-1], [Fact(UNSUPPORTED, framework="python 2")], PIN)
            return statements(rel, no, line, rel.rsplit("/", 1)[-1], [Fact(PYTHON, spec=f"=={m.group(1)}.{m.group(2)}.*")], PIN)
        return []
    return []
