"""``envman project detect``: read a cloned repository's own pins and answer with the stack that
serves it (and runs on this host), with the evidence for it.

:func:`detect` scans the repository once (:mod:`~envman.project.detect.repo`), lets each reader
turn the files it knows into statements (:mod:`~.sources`: requirements, conda, setup.py,
setup.cfg, pyproject, Pipfile, .python-version, runtime.txt; :mod:`~.images`: Dockerfiles and
compose files; :mod:`~.prose`: README and install pages; :mod:`~.shell`: install scripts and
notebooks; :mod:`~.code`: imports), decides
(:mod:`~.decide`) and works out the project layer (:mod:`~.layer`). Nothing in the repository is
executed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from envman.project.detect.decide import Decision, NoStack, decide
from envman.project.detect.facts import CUDA, FRAMEWORK, IMPORTS, PYTHON, Statement
from envman.project.detect.layer import Layer, requirements_layer
from envman.project.detect.repo import Repository
from envman.project.detect.setupfiles import read_setup_cfg, read_setup_py

if TYPE_CHECKING:
    from envman.host import HostFacts
    from envman.matrix.model import Matrix

__all__ = ["Detection", "NoStack", "detect", "gather"]

#: File names each reader takes (lower-cased paths, at most two folders down unless said).
_REQUIREMENTS = r"(?:[^/]+/){0,2}(?:[^/]*requirements[^/]*|reqs?)\.(?:txt|in)|(?:[^/]+/)?requirements/[^/]+\.txt"
_CONDA = r"(?:[^/]+/)?[^/]*(?:environment|env|conda)[^/]*\.ya?ml|(?:envs?|conda|environments?)/[^/]+\.ya?ml"
#: Any YAML file at most one folder down: a conda environment when its content says so.
_YAML = r"(?:[^/]+/)?[^/]+\.ya?ml"
_DOCKER = r"(?:[^/]+/){0,2}(?:dockerfile[^/]*|[^/]+\.dockerfile)|\.devcontainer/dockerfile[^/]*"
_PROSE = (r"(?:[^/]+/)?(?:(?:readme|install|installation|getting_started|get_started)[^/]*\.(?:md|rst|txt|markdown)|readme|install)"
          r"|docs?/[^/]*(?:install|requirement|get_?started|getting_?started|setup|environment)[^/]*\.(?:md|rst|txt)")


#: Paths of files for development, tests, docs, CI or examples: their pins are never the project's own.
_DEV_RE = re.compile(r"dev|test|doc|lint|(^|[^a-z])ci([^a-z]|$)|example")


def gather(repo: Repository, matrix: "Matrix | None" = None) -> list[Statement]:
    """Every statement the repository's files make about its stack."""
    from envman.project.detect.code import scan_code
    from envman.project.detect.images import COMPOSE, read_compose, read_dockerfile
    from envman.project.detect.prose import named_files, read_prose
    from envman.project.detect.shell import MAX_NOTEBOOKS, NOTEBOOKS, SCRIPTS, read_notebook, read_script
    from envman.project.detect.sources import (
        CONDA_LISTS,
        MAX_CONDA,
        MAX_YAML,
        conda_environment,
        read_conda,
        read_conda_list,
        read_pipfile,
        read_pyproject,
        read_python_version,
        read_requirements,
    )

    out: list[Statement] = []
    seen: set[str] = set()
    for rel in repo.matching(_REQUIREMENTS):
        demote = _DEV_RE.search(rel) is not None
        for s in read_requirements(repo, rel, seen=seen):
            out.append(_demoted(s) if demote else s)
    conda = repo.matching(_CONDA)[:MAX_CONDA]
    for rel in conda:
        out += read_conda(repo, rel)
    for rel in repo.matching(_YAML, max_depth=1)[:MAX_YAML]:
        if rel not in conda and conda_environment(repo, rel):
            # found by its content: one for docs, tests or CI (``docs/rtd.yml``) is a range at most
            demote = _DEV_RE.search(rel) is not None
            out += [_demoted(s) if demote else s for s in read_conda(repo, rel)]
    for rel in dict.fromkeys(repo.matching(CONDA_LISTS) + repo.matching(_REQUIREMENTS)):
        demote = _DEV_RE.search(rel) is not None
        out += [_demoted(s) if demote else s for s in read_conda_list(repo, rel)]
    for name, reader in (("setup.py", read_setup_py), ("setup.cfg", read_setup_cfg), ("pyproject.toml", read_pyproject),
                         ("pipfile", read_pipfile)):
        for rel in repo.matching(name.replace(".", r"\."), max_depth=0):
            out += reader(repo, rel)
    for rel in repo.matching(r"\.python-version|runtime\.txt", max_depth=0):
        out += read_python_version(repo, rel)
    bundled = _bundled_projects(repo)
    for rel in repo.matching(_DOCKER):
        out += [_as_command(s) if _inside(rel, bundled) else s for s in read_dockerfile(repo, rel, matrix)]
    for rel in repo.matching(COMPOSE):
        out += [_as_command(s) if _inside(rel, bundled) else s for s in read_compose(repo, rel, matrix)]
    for rel in repo.matching(SCRIPTS):
        demote = _DEV_RE.search(rel) is not None
        out += [_demoted(s) if demote else s for s in read_script(repo, rel)]
    for rel in repo.matching(NOTEBOOKS)[:MAX_NOTEBOOKS]:
        demote = _DEV_RE.search(rel) is not None
        out += [_demoted(s) if demote else s for s in read_notebook(repo, rel)]
    named: set[str] = set()
    for rel in repo.matching(_PROSE, max_depth=1):
        out += read_prose(repo, rel, matrix)
        named |= named_files(repo, rel)
    out = [replace(s, named=True) if s.file in named else s for s in out]
    code, folders = scan_code(repo)
    out = [_scoped(s, folders) for s in out] + code
    return out


def _scoped(s: Statement, folders: dict[str, str]) -> Statement:
    """A statement of a file in a top-level folder whose code imports one framework only speaks
    for that framework's implementation (``tf/README.md`` in a repository whose ``pytorch/``
    holds the other one)."""

    head, sep, _ = s.file.partition("/")
    return replace(s, scope=(head, folders[head])) if sep and head in folders else s


#: A project's own manifest and README: a folder below the root holding both is a bundled project.
_MANIFEST_RE = re.compile(r"(.+)/(?:setup\.py|pyproject\.toml)")
_README_RE = re.compile(r"(.+)/readme(?:\.[a-z]{1,8})?")


def _bundled_projects(repo: Repository) -> tuple[str, ...]:
    """Folders below the root that are projects of their own (a setup.py or pyproject.toml and a
    README beside it: a vendored toolbox such as a detection library), as ``folder/`` prefixes."""
    manifests, readmes = set(), set()
    for f in repo.files:
        low = f.lower()
        if m := _MANIFEST_RE.fullmatch(low):
            manifests.add(m.group(1))
        elif m := _README_RE.fullmatch(low):
            readmes.add(m.group(1))
    return tuple(sorted(folder + "/" for folder in manifests & readmes))


def _inside(rel: str, folders: tuple[str, ...]) -> bool:
    return rel.lower().startswith(folders)


def _as_command(s: Statement) -> Statement:
    """A bundled project's Dockerfile statement: it builds that project's image, not the
    repository's, so it weighs as an install command at most."""

    from envman.project.detect.facts import COMMAND, STRENGTH

    return replace(s, strength=COMMAND) if STRENGTH[s.strength] > STRENGTH[COMMAND] else s


def _demoted(s: Statement) -> Statement:
    """A statement of a development, test or docs requirements file: never a pin of the project's
    own stack, at most a range."""

    from envman.project.detect.facts import RANGE, STRENGTH

    return replace(s, strength=RANGE) if STRENGTH[s.strength] > STRENGTH[RANGE] else s


@dataclass(frozen=True)
class Detection:
    """The answer for one repository: a stack with its evidence, or the one line why none."""

    root: str
    decision: Decision | None
    statements: tuple[Statement, ...]
    problem: NoStack | None = None
    layer: Layer | None = None
    truncated: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def stack(self) -> str | None:
        return self.decision.stack.name if self.decision else None

    def decided_by(self, limit: int = 5) -> list[Statement]:
        """The few used statements that decided: the strongest of each kind of fact first."""
        if self.decision is None:
            return [s for s in self.statements if s.used][:limit]
        used = [s for s in self.decision.evidence if s.used]
        out: list[Statement] = []
        for kind in (FRAMEWORK, CUDA, PYTHON, IMPORTS):
            first = next((s for s in used if s.fact.kind == kind), None)
            if first is not None:
                out.append(first)
        out += [s for s in used if s not in out]
        return out[:limit]

    def to_json(self) -> dict[str, Any]:
        st = self.decision.stack if self.decision else None
        evidence = self.decision.evidence if self.decision else self.statements
        return {
            "root": self.root,
            "stack": st.name if st else None,
            "framework": st.framework if st else None,
            "framework_version": st.framework_version if st else None,
            "cuda": st.cuda if st else None,
            "python": st.python if st else None,
            "evidence": [s.to_json() for s in evidence],
            "conflicts": list(self.decision.conflicts) if self.decision else [],
            "alternatives": list(self.decision.alternatives) if self.decision else [],
            "host": self.decision.host.to_json() if self.decision and self.decision.host else None,
            "requirements": self.layer.to_json() if self.layer else None,
            "error": {"what": self.problem.what, "fix": self.problem.fix} if self.problem else None,
            "notes": list(self.notes) + (list(self.decision.notes) if self.decision else []),
            "truncated": self.truncated,
        }


def detect(root: str | os.PathLike[str], matrix: "Matrix", *, host: "HostFacts | None" = None,
           platform: str | None = None) -> Detection:
    """Read the repository at ``root`` and decide its stack (see :mod:`~.decide` for the rules)."""
    repo = Repository.scan(root)
    statements = gather(repo, matrix)
    notes = ("the repository is larger than detection reads (its first files only)",) if repo.truncated else ()
    try:
        decision = decide(matrix, statements, host=host, platform=platform)
    except NoStack as exc:
        return Detection(str(repo.root), None, tuple(statements), problem=exc, truncated=repo.truncated, notes=notes)
    layer = requirements_layer(repo, decision.stack)
    return Detection(str(repo.root), decision, tuple(statements), layer=layer, truncated=repo.truncated, notes=notes)


def summary_lines(d: Detection, *, limit: int = 5) -> list[str]:
    """The short form: the stack and the statements that decided it, what was set aside against
    it, the host's verdict and the project layer in one line."""
    if d.decision is None:
        return []
    st = d.decision.stack
    what = f"{st.framework} {st.framework_version}, " + (f"CUDA {st.cuda}" if st.cuda else "CPU") + f", Python {st.python}"
    out = [f"{st.name}  ({what})"]
    for s in d.decided_by(limit):
        out.append(f"  {s.where:<28} {s.fact.means():<28} {s.text}")
    for c in d.decision.conflicts[:3]:
        out.append(f"  set aside: {c['set_aside']} (contradicts {c['taken']})")
    for note in (*d.notes, *d.decision.notes):
        out.append(f"  note: {note}")
    h = d.decision.host
    if h is not None:
        out.append(f"  here: {h.verdict} on {h.summary}")
    if d.layer is not None and d.layer.source:
        counts: dict[str, int] = {}
        for ln in d.layer.lines:
            counts[ln.outcome] = counts.get(ln.outcome, 0) + 1
        parts = [f"{n} {k}" for k, n in counts.items()]
        out.append(f"  requirements from {d.layer.source}: {', '.join(parts) or 'none'}")
    return out
