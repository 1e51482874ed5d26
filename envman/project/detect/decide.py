"""From a repository's statements to one stack, with the reason for every statement.

The rules, in order:

1. **The framework** is the one the code imports in the most files; a framework pinned or named
   beside it (TensorBoard's ``tensorflow``, an export test's ``onnxruntime``, ``tensorflow-cpu`` for
   tf.data next to JAX) is set aside as a tool. With no Python code, the framework of the strongest
   pin wins, a GPU build before a CPU-only one, ``onnxruntime`` last. Code that is mostly Lua Torch,
   Caffe, Theano, MXNet, ... or Python 2 gets no stack: envman does not build those.
2. **Each fact is decided by weight**: a file an installer reads (an exact pin, then a range) beats
   a Dockerfile's base image, which beats an install command in a RUN line or a README, which beats
   a sentence. Statements are taken strongest first; one that contradicts what is already taken is
   set aside, and the pair is a conflict.
3. **The release**: the exact (or ``1.7.*``) release the strongest statement names, within every
   range taken; with ranges alone, the newest release in them. A release the matrix does not have
   is an unmet pin, never replaced by another release.
4. **CUDA and Python**: a stated CUDA beats the default variant; a stated Python beats the base
   image's default. A pin (not prose) that the release has no build for is unmet; prose that cannot
   be met is set aside.
5. **The host**: where a GPU is known (this host's, or ``--gpu``/``--driver``), the stack must run
   on it by the verdict engine; the nearest stack within the same pins that does is taken, else the
   pin that would have to relax is named. With no pin at all, the newest stack that runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envman.project.detect.facts import (
    BUILT, COMMAND, CUDA, CUDNN, FRAMEWORK, IMPORTS, PIN, PROSE, PYTHON, STRENGTH, UNSUPPORTED, UNSUPPORTED_NAMES,
    Statement,
)
from envman.project.detect.pins import FRAMEWORK_DISTS, OWN_RELEASES, release_meets
from envman.stack.names import MIN_STANDALONE_PYTHON

if TYPE_CHECKING:
    from envman.host import HostFacts
    from envman.matrix.model import FrameworkBuild, Matrix
    from envman.stack.names import Stack
    from envman.stack.verdict import Verdict

#: A statement of at least this weight is a pin: one that cannot be met ends detection with the
#: reason. Weaker statements (prose) that cannot be met are set aside.
HARD = STRENGTH[COMMAND]

#: Every Python a stack may have, to judge whether two Python statements can both hold.
_PYTHONS = [Version(f"3.{m}") for m in range(0, 20)] + [Version("2.7")]


class NoStack(Exception):
    """No stack serves the repository (or runs here): one line, and what would help."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(what)
        self.what, self.fix = what, fix


@dataclass(frozen=True)
class HostJudgement:
    summary: str
    verdict: str
    runs: bool
    reasons: tuple[str, ...]
    first_choice: str | None = None  # the stack the pins alone chose, when it does not run here

    def to_json(self) -> dict[str, Any]:
        return {"summary": self.summary, "verdict": self.verdict, "runs": self.runs, "reasons": list(self.reasons),
                "first_choice": self.first_choice}


@dataclass(frozen=True)
class Decision:
    stack: "Stack"
    evidence: tuple[Statement, ...]
    conflicts: tuple[dict[str, Any], ...]
    alternatives: tuple[dict[str, Any], ...]
    host: HostJudgement | None = None
    notes: tuple[str, ...] = field(default=())


# --------------------------------------------------------------------------- helpers


def _spec(text: str) -> SpecifierSet | None:
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        return None


def _holds(spec: SpecifierSet, version: Version) -> bool:
    return spec.contains(version, prereleases=True)


def _installed_versions(rows: Sequence["FrameworkBuild"]) -> dict[Version, tuple[Version, ...]]:
    """Per release of ``rows``, the versions its rows install of the framework's own distribution
    where they differ from the release (torch 0.3.0 rows install 0.3.0.post4)."""
    out: dict[Version, set[Version]] = {}
    for b in rows:
        for p in b.packages:
            name, eq, version = p.partition("==")
            if not eq or FRAMEWORK_DISTS.get(canonicalize_name(name.split("[")[0]), ("", None))[0] != b.framework:
                continue
            try:
                v = Version(version.split("+")[0])
            except InvalidVersion:
                continue
            if v != b.version:
                out.setdefault(b.version, set()).add(v)
    return {k: tuple(sorted(v)) for k, v in out.items()}


def _named_versions(spec_text: str) -> list[Version]:
    out = []
    for part in spec_text.split(","):
        text = part.strip().lstrip("<>=!~").rstrip(".*").rstrip(".")
        try:
            out.append(Version(text))
        except InvalidVersion:
            continue
    return out



def _installs(rows: Sequence["FrameworkBuild"], name: str) -> bool:
    """Whether any of ``rows`` pins the package ``name`` (a companion such as torchvision)."""
    want = canonicalize_name(name.split("[")[0])
    return any("==" in p and canonicalize_name(p.split("==")[0].split("[")[0]) == want for b in rows for p in b.packages)

def _companion_pairs(rows: Sequence["FrameworkBuild"], name: str) -> dict[Version, set[Version]]:
    """The releases of the companion ``name`` the rows pin (``jaxlib==0.1.55+cuda110`` → 0.1.55), each
    with the framework releases of the rows that pin it."""
    want = canonicalize_name(name)
    pairs: dict[Version, set[Version]] = {}
    for b in rows:
        for p in b.packages:
            dist, pinned, version = p.partition("==")
            if pinned and canonicalize_name(dist.partition("[")[0]) == want and (release := _release(version)):
                pairs.setdefault(release, set()).add(b.version)
    return pairs


def _release(version: str) -> Version | None:
    """The release of a pinned version, its local label dropped (``0.1.55+cuda110`` → 0.1.55)."""
    try:
        return Version(version.partition("+")[0])
    except InvalidVersion:
        return None


def _is_exact(spec_text: str) -> bool:
    """An exact pin or a release prefix (``==1.7.1``, ``==1.7.*``): it names the release."""
    parts = [p.strip() for p in spec_text.split(",") if p.strip()]
    return len([p for p in parts if p.startswith("==")]) == 1


def _cuda_fits(want: str | None, have: str | None) -> bool:
    """A stated CUDA (``"11.3"``, a major ``"11"``, or None: a CPU build) against a build's."""
    if want is None or have is None:
        return want == have
    return have == want or have.startswith(want + ".") or want.startswith(have + ".")


def _cuda_floor_fits(floor: str, have: str | None) -> bool:
    return have is not None and Version(have) >= Version(floor)


def _cuda_agree(a: Statement, b: Statement) -> bool:
    """Whether two CUDA statements can both hold (a floor, ``CUDA 11.3+``, holds with any CUDA at
    or above it)."""
    fa, fb = a.fact, b.fact
    if fa.spec == ">=" and fb.spec == ">=":
        return True
    if fa.spec == ">=" or fb.spec == ">=":
        floor, other = (fa, fb) if fa.spec == ">=" else (fb, fa)
        return other.version is not None and (_cuda_floor_fits(str(floor.version), other.version)
                                              or str(floor.version).startswith(other.version + "."))
    return _cuda_fits(fa.version, fb.version) or _cuda_fits(fb.version, fa.version)


def _key(s: Statement) -> tuple[int, bool, int, str, int]:
    """Strongest first; at equal weight a file a README's install command names, then the
    shallower file, then file order."""
    return (-s.weight, not s.named, s.file.count("/"), s.file, s.line)


# --------------------------------------------------------------------------- the decision


class _GiveWay(Exception):
    """A CUDA or Python statement that must give way to the pinned release (see ``_Decider.gives_way``)."""

    def __init__(self, statement: Statement, about: str, why: str) -> None:
        super().__init__(why)
        self.statement, self.about, self.why = statement, about, why


class _Decider:
    def __init__(self, matrix: "Matrix", statements: Sequence[Statement], host: "HostFacts | None",
                 platform: str | None) -> None:
        self.matrix = matrix
        self.host = host
        self.platform = platform
        self.pending = list(statements)
        self.done: dict[int, Statement] = {}
        self.conflicts: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.chosen: str | None = None  # the framework, once decided
        #: top-level folders that hold an implementation in another framework
        self.elsewhere: dict[str, str] = {}

    # bookkeeping
    def mark(self, s: Statement, used: bool, why: str) -> None:
        i = self.position(s)
        if i not in self.done:
            self.done[i] = s.decided(used, why)

    def position(self, s: Statement) -> int:
        """Where ``s`` stands among the statements (by identity: two lines may say the same)."""
        if not hasattr(self, "_positions"):
            self._positions = {id(x): i for i, x in enumerate(self.pending)}
        return self._positions[id(s)]

    def decided_on_line(self, s: Statement) -> list[Statement]:
        """What was decided of the statements on ``s``'s line (its file and line), found through an
        index of the lines: a repository of thousands of lines asks this of each statement."""
        return [self.done[i] for i in dict.fromkeys(self._line_index().get((s.file, s.line), ())) if i in self.done]

    def _line_index(self) -> dict[tuple[str, int], list[int]]:
        """The positions of the statements by line (a stand-in's line added where it stands)."""
        if not hasattr(self, "_lines"):
            self._lines: dict[tuple[str, int], list[int]] = {}
            for i, x in enumerate(self.pending):
                self._lines.setdefault((x.file, x.line), []).append(i)
        return self._lines

    def retake(self, *kinds: str) -> None:
        """Forget what was decided of these kinds of fact, to decide them again: what was taken
        and what was set aside against it; a statement set aside for its own sake (a tool's
        framework, a release given way) stays set aside."""
        again = ("contradicts", "on a line", "no ", "names a ")
        for i, s in list(self.done.items()):
            if s.fact.kind in kinds and (s.used or s.why.startswith(again)) and not s.why.startswith("names a release whose"):
                del self.done[i]
        self.conflicts = [c for c in self.conflicts if c["about"] not in ("CUDA", "Python") and not c["about"].endswith("release")]

    def substitute(self, s: Statement, stand_in: Statement, used: bool, why: str) -> Statement:
        """Decide ``s`` and let ``stand_in`` (what is kept of it) stand at its place from now on."""
        i = self.position(s)
        self.done[i] = s.decided(used, why)
        self._positions[id(stand_in)] = i
        self._line_index().setdefault((stand_in.file, stand_in.line), []).append(i)
        return stand_in

    def gives_way(self, s: Statement, version_stmts: Sequence[Statement]) -> bool:
        """Whether a CUDA or Python pin that no build of the pinned release meets gives way to that
        release: the release's statement weighs more (a requirements pin over a base image's
        Python), ``s``'s file is another install route (:meth:`other_route`), or ``s`` comes from a Dockerfile that installs no framework while another
        Dockerfile names the release (an image that builds a native tool beside the training one)."""
        if not version_stmts:
            return False
        if s.weight < max(v.weight for v in version_stmts) or self.other_route(s):
            return True
        return (s.source == "dockerfile" and any(v.source == "dockerfile" and v.file != s.file for v in version_stmts)
                and not any(x.fact.kind == FRAMEWORK and x.file == s.file for x in self.pending))

    def other_route(self, s: Statement) -> bool:
        """Whether ``s``'s file pins the framework only at releases set aside as contradicting the
        one taken: a second way to install the project (``conda-gpu.yml`` beside a
        ``requirements-gpu.txt`` of another release), whose CUDA and Python go with its release."""
        mine = [d for d in self.done.values() if d.file == s.file and d.fact.kind == FRAMEWORK
                and d.fact.framework == self.chosen and (d.fact.spec or d.fact.companion)]
        return bool(mine) and all(d.used is False and d.why.startswith("contradicts") for d in mine)

    def set_aside_for_release(self, s: Statement, version_stmts: Sequence[Statement], about: str, why: str) -> None:
        """``s`` contradicts the release the stronger statements pin: set aside, listed as a conflict."""
        pin = max(version_stmts, key=lambda v: v.weight)
        self.done[self.position(s)] = s.decided(False, why)
        self.conflicts.append({"about": about, "taken": pin.where + " " + pin.fact.means(),
                               "set_aside": s.where + " " + s.fact.means(), "set_aside_text": s.text})

    def anchored(self, s: Statement) -> bool:
        """Whether ``s``'s line also names the release taken (``FROM tensorflow/tensorflow:1.15.4-gpu``):
        its CUDA and Python are that release's, not a second opinion."""
        return any(d.used and d.fact.kind == FRAMEWORK and d.fact.framework == self.chosen and (d.fact.spec or d.fact.version)
                   and d.file == s.file and d.line == s.line for d in self.decided_on_line(s))

    def of(self, kind: str, framework: str | None = None) -> list[Statement]:
        return sorted((s for i, s in enumerate(self.pending) if i not in self.done and s.fact.kind == kind
                       and (framework is None or s.fact.framework == framework)), key=_key)

    def siblings_set_aside(self, s: Statement) -> bool:
        """Whether the same line's framework statement was set aside: its CUDA goes with it (a
        decoy's ``torch==1.10.0+cu113`` in a TensorFlow repository; the CUDA of a base image whose
        release lost to a pin). A jaxlib release that gives way to a jax pin keeps its CUDA:
        ``jax==0.2.0`` with ``jaxlib==0.1.56+cuda100`` ran on CUDA 10.0, whichever jaxlib the rows pair."""
        return any(d.used is False and d.file == s.file and d.line == s.line and d.source == s.source
                   and (d.fact.kind == UNSUPPORTED or (d.fact.kind == FRAMEWORK and (
                       d.fact.spec or d.fact.companion or d.fact.framework != self.chosen)
                       and not (d.fact.framework == self.chosen and (d.fact.companion or "").partition("==")[0] in OWN_RELEASES)))
                   for d in self.decided_on_line(s))

    def evidence(self) -> tuple[Statement, ...]:
        out = []
        for i, s in enumerate(self.pending):
            out.append(self.done.get(i) or s.decided(False, "not needed: the facts it states were settled by stronger statements"))
        return tuple(sorted(out, key=lambda s: (not s.used, _key(s))))

    # 1. the framework
    def framework(self) -> str:
        imports = {s.fact.framework: s for s in self.of(IMPORTS)}
        counts = {fw: s.fact.count for fw, s in imports.items() if fw}
        unsupported = self.of(UNSUPPORTED)
        py2 = [s for s in unsupported if s.fact.framework == "python 2"]
        pins: dict[str, list[Statement]] = {}
        for s in self.of(FRAMEWORK):
            pins.setdefault(s.fact.framework or "", []).append(s)
        built = {fw: n for fw, n in counts.items() if fw in BUILT}

        def pinned(fw: str) -> tuple[int, int]:
            """How strongly the repository pins ``fw``: its strongest statement, then the shallowest."""
            stmts = pins.get(fw, [])
            top = max((s.weight for s in stmts), default=0)
            return (top, -min((s.file.count("/") for s in stmts if s.weight == top), default=0))

        # at equal import counts (a bundled baseline in another framework) the strongest pin decides
        top_built = max(built.items(), key=lambda kv: (kv[1], pinned(kv[0]), -BUILT.index(kv[0])), default=None)
        top_other = max(((fw, n) for fw, n in counts.items() if fw not in BUILT), key=lambda kv: kv[1], default=None)
        if top_other and (top_built is None or top_other[1] >= top_built[1]):
            stmt = imports[top_other[0]]
            self.mark(stmt, True, "the framework the code uses most")
            raise NoStack(f"{stmt.where}: the code uses {UNSUPPORTED_NAMES.get(top_other[0], top_other[0])} "
                          f"({stmt.fact.means()}), which envman does not build",
                          "envman builds PyTorch, TensorFlow, JAX and ONNX Runtime stacks; port the code, or use the "
                          "framework's own container")
        if top_built:
            chosen = top_built[0]
            why = (f"the framework the code imports most ({top_built[1]} file{'s' if top_built[1] != 1 else ''}"
                   + "".join(f"; {fw} {n}" for fw, n in sorted(counts.items(), key=lambda kv: -kv[1]) if fw != chosen) + ")"
                   + (", and its pin is the strongest" if any(n == top_built[1] for fw, n in built.items() if fw != chosen)
                      and pins.get(chosen) else ""))
            self.mark(imports[chosen], True, why)
        else:
            from_pins = self._framework_from_pins(pins)
            if from_pins is None:
                hard_unsupported = [s for s in unsupported if s.hard and s.fact.framework != "python 2"] \
                    or [s for s in unsupported if s.fact.framework != "python 2"]
                if hard_unsupported:
                    s = hard_unsupported[0]
                    self.mark(s, True, "the only framework the repository names")
                    raise NoStack(f"{s.where}: {s.fact.means()} ({s.text})",
                                  "envman builds PyTorch, TensorFlow, JAX and ONNX Runtime stacks; port the code, or use "
                                  "the framework's own container")
                raise NoStack("nothing in the repository names or imports a framework envman builds (PyTorch, TensorFlow, "
                              "JAX, ONNX Runtime)", "give the stack: envman project init --stack NAME (list them: envman "
                              "matrix ls)")
            chosen = from_pins
        for s in imports.values():
            if s.fact.framework != chosen:
                self.mark(s, False, f"the code imports {chosen} in more files" if counts.get(chosen, 0) > s.fact.count
                          else f"the code imports {chosen} in as many files, and pins it more strongly")
        for i, s in enumerate(self.pending):
            if s.scope is not None and s.scope[1] != chosen and i not in self.done:
                folder, other = s.scope
                self.mark(s, False, f"speaks for {folder}/, whose code imports {other}: the framework is {chosen}")
                self.elsewhere.setdefault(folder, other)
        for fw, stmts in pins.items():
            if fw != chosen:
                for s in stmts:
                    self.mark(s, False, f"{fw} serves a tool here: the framework is {chosen}"
                              + (f" ({counts[chosen]} files import it, {counts.get(fw, 0)} import {fw})" if chosen in counts else ""))
        for s in unsupported:
            if s.fact.framework != "python 2":
                self.mark(s, False, f"the code uses {chosen}" if chosen in counts else f"the repository pins {chosen}")
        self._python2(py2, chosen)
        self.chosen = chosen
        return chosen

    def _framework_from_pins(self, pins: dict[str, list[Statement]]) -> str | None:
        def score(item: tuple[str, list[Statement]]) -> tuple[int, int, int, int]:
            fw, stmts = item
            cpu_only = all(s.fact.gpu is False for s in stmts)
            return (fw != "onnxruntime", not cpu_only, max(s.weight for s in stmts), -BUILT.index(fw))

        known = [(fw, stmts) for fw, stmts in pins.items() if fw in BUILT]
        if not known:
            return None
        fw, stmts = max(known, key=score)
        return fw

    def _python2(self, py2: list[Statement], framework: str) -> None:
        if not py2:
            return
        code = [s for s in py2 if s.source == "imports" and s.weight > STRENGTH[PROSE]]
        some = [s for s in py2 if s.source == "imports" and s.weight <= STRENGTH[PROSE]]  # a few files
        said = [s for s in py2 if s.source != "imports"]
        hard = [s for s in said if s.hard]
        py3 = [s for s in self.of(PYTHON) if s.hard or s.source != "readme"]
        if code or (hard and not py3) or (some and said and not py3 and not self.of(PYTHON)):
            s = (code or hard or said)[0]
            if not code and not hard:  # what the README says, borne out by the code
                self.mark(some[0], True, "what the code needs")
            self.mark(s, True, "what the code needs")
            raise NoStack(f"{s.where}: the repository needs Python 2 ({s.text}), which envman does not build",
                          "port the code to Python 3 (2to3 is a start); envman's stacks run Python 3")
        for s in py2:
            self.mark(s, False, "other statements name Python 3")

    # 2-3. the release
    def releases(self, framework: str) -> tuple[list[Version], list[Statement]]:
        """The releases the statements allow (preferred first) and the statements taken."""
        rows = [b for b in self.matrix.builds if b.framework == framework]
        known = sorted({b.version for b in rows})
        installed = _installed_versions(rows)  # once: a README of thousands of pins asks per line
        taken: list[tuple[Statement, Callable[[Version], bool], list[Version]]] = []
        universe = set(known)
        absent: list[Version] = []  # releases advice named that the matrix lacks, strongest first
        for s in self.release_statements(framework):
            want = self._want(s, rows, installed)
            if want is None:
                companion, _, companion_version = (s.fact.companion or "").partition("==")
                if s.fact.spec == "" and s.fact.companion is None:
                    self.mark(s, True, "names the framework")
                elif companion and not _installs(rows, companion):
                    # no row installs it (torchaudio beside torch and torchvision): its release says
                    # nothing of the framework's here, and is no contradiction
                    self.mark(s, True, f"names the framework (no {framework} row installs {companion})")
                elif s.hard and companion in OWN_RELEASES and (pinned := _named_versions("==" + companion_version)) \
                        and (pairs := _companion_pairs(rows, companion)):
                    # a pin of a jaxlib no row installs (jaxlib==0.1.51) names the framework's native
                    # library itself, which any row would replace: it is a release the matrix lacks, as a
                    # pin of the framework's own release is (an old torchvision, released apart from
                    # torch, is set aside instead); the rows of the jaxlib release nearest it are named
                    near = min(pairs, key=lambda c: (abs(_num(c) - _num(pinned[0])), -_num(c)))
                    self._unmet_release(framework, s, [max(pairs[near])], known, [],
                                        f"the {companion} releases its {framework} rows install: {min(pairs)} to {max(pairs)}")
                else:
                    self.mark(s, False, f"the matrix has no {framework} release that {s.fact.companion or s.fact.spec} fits")
                continue
            if not s.hard and (s.fact.companion or _is_exact(s.fact.spec)) and not any(want[0](v) for v in known):
                # advice (a README) naming a release the matrix lacks is set aside before it can
                # outweigh advice that names one it has; the releases nearest it come first
                absent.extend(want[1][:1])
                self.mark(s, False, f"names a {framework} release the matrix does not have (a README is advice, not a pin); "
                          "the releases nearest it come first")
                continue
            universe |= set(want[1])
        accepts: dict[str, frozenset[Version]] = {}  # one statement's releases of the universe, by its spec
        # the first statement taken of each set of releases: a clash depends only on the set, so
        # thousands of equal pins are one comparison, not one per pin taken before
        first_taken: dict[frozenset[Version], tuple[Statement, Callable[[Version], bool], list[Version]]] = {}
        taken_releases: dict[int, frozenset[Version]] = {}  # a taken statement's releases (known is in universe)
        for s in self.release_statements(framework):
            want = self._want(s, rows, installed)
            assert want is not None  # the others were marked above
            test, named = want
            key = s.fact.companion or s.fact.spec
            if key not in accepts:
                accepts[key] = frozenset(v for v in universe if test(v))
            mine = accepts[key]
            clash = next((t for releases, t in first_taken.items() if not mine & releases), None)
            if clash is not None:
                self.mark(s, False, f"contradicts {clash[0].where} ({clash[0].fact.means()}), which weighs more")
                self.conflicts.append({"about": f"{framework} release", "taken": clash[0].where + " " + clash[0].fact.means(),
                                       "set_aside": s.where + " " + s.fact.means(), "set_aside_text": s.text})
                continue
            taken.append((s, test, named))
            first_taken.setdefault(mine, taken[-1])
            taken_releases[id(s)] = mine
            self.mark(s, True, "taken")
        while True:
            sets = {taken_releases[id(t[0])] for t in taken}  # each distinct set once, not each statement
            allowed = [v for v in known if all(v in r for r in sets)]
            exact = next((t for t in taken if t[0].fact.companion or _is_exact(t[0].fact.spec)), None)
            if exact is None:
                break
            preferred = [v for v in allowed if exact[1](v)]
            if preferred:
                return sorted(preferred, reverse=True), [t[0] for t in taken]
            if exact[0].hard:
                self._unmet_release(framework, exact[0], exact[2], known, [t[0] for t in taken])
            # advice (a README) naming a release the matrix lacks is set aside, not obeyed
            self.done[self.position(exact[0])] = exact[0].decided(
                False, f"names a {framework} release the matrix does not have (a README is advice, not a pin)")
            taken.remove(exact)
        if not allowed and taken:
            s = taken[0][0]
            if s.hard:
                self._unmet_release(framework, s, taken[0][2], known, [t[0] for t in taken])
        if absent:  # the nearest first, the newer of two as near
            return sorted(allowed or known, key=lambda v: (abs(_num(v) - _num(absent[0])), -_num(v))), [t[0] for t in taken]
        return sorted(allowed or known, reverse=True), [t[0] for t in taken]

    def release_statements(self, framework: str) -> list[Statement]:
        """The framework's undecided statements, strongest first; at equal weight those of a file a
        README's install command names, then the shallower file's, and at equal depth those of a
        file that names a GPU build before another file's (a training environment file beside an
        evaluation one); in one file, its line order."""
        stmts = self.of(FRAMEWORK, framework)
        gpu_files = {s.file for s in stmts if s.fact.gpu is True}
        return sorted(stmts, key=lambda s: (-s.weight, not s.named, s.file.count("/"), s.file not in gpu_files, s.file,
                                            s.line))

    def _want(self, s: Statement, rows: Sequence["FrameworkBuild"], installed: dict[Version, tuple[Version, ...]]
              ) -> tuple[Callable[[Version], bool], list[Version]] | None:
        if s.fact.companion and not _installs(rows, s.fact.companion.partition("==")[0]):
            return None
        if s.fact.companion:

            name, _, version = s.fact.companion.partition("==")
            pairs = _companion_pairs(rows, name)
            try:
                want = Version(version.split("+")[0])
            except InvalidVersion:
                return None
            if want not in pairs:
                # a patch release of the companion the rows do not install (torchvision 0.8.1) goes with
                # the framework release of the nearest earlier patch of the same minor (0.8.0 → torch 1.7.0)
                lower = [c for c in pairs if c.release[:2] == want.release[:2] and c < want]
                if not lower:
                    return None
                want = max(lower)
            versions = sorted(pairs[want])
            return (lambda v, vs=frozenset(versions): v in vs), versions
        if not s.fact.spec:
            return None
        spec = _spec(s.fact.spec)
        if spec is None:
            return None
        return (lambda v, sp=spec: release_meets(sp, v, installed.get(v, ()))), _named_versions(s.fact.spec)

    def _unmet_release(self, framework: str, s: Statement, named: list[Version], known: list[Version],
                       taken: list[Statement], span: str | None = None) -> None:
        target = named[0] if named else None
        near = sorted(known, key=lambda v: (abs(_num(v) - _num(target)) if target else 0, -_num(v)))[:3] if known else []
        rows = []
        for v in near:
            name = self._row_name(framework, v)
            if name:
                rows.append(name)
        span = span or f"its {framework} releases: " + (f"{known[0]} to {known[-1]}" if known else "none")
        raise NoStack(f"{s.where} pins {framework} {s.fact.companion or s.fact.spec} ({s.text}), a release the matrix "
                      f"does not have ({span})",
                      f"nearest: {', '.join(rows) or 'none'}; give another with --stack, or add the release with a "
                      "matrix row (envman matrix update, or --matrix FILE)")

    def _row_name(self, framework: str, version: Version) -> str | None:
        rows = [b for b in self.matrix.builds if b.framework == framework and b.version == version]
        gpu = [b for b in rows if b.cuda is not None]
        pick = [b for b in gpu if b.default] or gpu or rows
        return pick[0].name if pick else None

    # 4. CUDA
    def cuda(self, framework: str) -> tuple[list[Statement], bool | None]:
        """The CUDA statements taken (strongest first) and whether a CPU or GPU build was asked for."""
        taken: list[Statement] = []
        # the first taken of each CUDA (and floor or not), all that _cuda_agree looks at: thousands
        # of equal statements are one comparison, not one per statement taken before
        first_taken: dict[tuple[bool, str | None], Statement] = {}
        # at equal weight a GPU build's CUDA before a CPU build (a Dockerfile.cpu beside a Dockerfile.gpu)
        for s in sorted(self.of(CUDA), key=lambda s: (-s.weight, s.fact.version is None, not self.anchored(s),
                                                      *_key(s)[1:])):
            if self.siblings_set_aside(s):
                self.mark(s, False, "on a line set aside")
                continue
            if s.fact.framework is not None and s.fact.framework != framework:
                self.mark(s, False, f"the CUDA of {s.fact.framework}, a tool here: the framework is {framework}")
                continue
            clash = next((t for t in first_taken.values() if not _cuda_agree(s, t)), None)
            if clash is not None:
                self.mark(s, False, f"contradicts {clash.where} ({clash.fact.means()}), which weighs more")
                self.conflicts.append({"about": "CUDA", "taken": clash.where + " " + clash.fact.means(),
                                       "set_aside": s.where + " " + s.fact.means(), "set_aside_text": s.text})
                continue
            taken.append(s)
            first_taken.setdefault((s.fact.spec == ">=", s.fact.version), s)
            self.mark(s, True, "taken")
        gpu = None
        if taken:
            gpu = taken[0].fact.version is not None or taken[0].fact.spec == ">="
        else:
            flags = {s.fact.gpu for s in self.done.values() if s.used and s.fact.kind == FRAMEWORK
                     and s.fact.framework == framework and s.fact.gpu is not None}
            # one statement of a GPU build is enough (a Dockerfile.cpu beside a Dockerfile.gpu)
            gpu = True if True in flags else False if flags else None
        return taken, gpu

    # 5. Python
    def pythons(self) -> list[Statement]:
        taken: list[Statement] = []
        for s in sorted(self.of(PYTHON), key=lambda s: (-s.weight, not self.anchored(s), *_key(s)[1:])):
            spec = _spec(python_minor(s.fact.spec))
            if spec is None:
                self.mark(s, False, "not a Python version envman reads")
                continue
            clash = next((t for t in taken if not any(_holds(spec, v) and _holds(_spec(python_minor(t.fact.spec)) or SpecifierSet(), v)
                                                      for v in _PYTHONS)), None)
            if clash is not None:
                self.mark(s, False, f"contradicts {clash.where} ({clash.fact.means()}), which weighs more")
                self.conflicts.append({"about": "Python", "taken": clash.where + " " + clash.fact.means(),
                                       "set_aside": s.where + " " + s.fact.means(), "set_aside_text": s.text})
                continue
            taken.append(s)
            self.mark(s, True, "taken")
        return taken


def python_minor(spec: str) -> str:
    """A Python specifier at the grain stacks have (``3.8``, not ``3.8.5``): ``==3.8.5`` →
    ``==3.8.*``, ``>=3.8.1`` → ``>=3.8``, ``<3.11.2`` → ``<3.12``, ``!=3.9.0`` dropped."""
    out = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):

        m = re.fullmatch(r"(==|>=|<=|>|<|~=|!=|===)\s*([0-9]+)\.([0-9]+)\.([0-9]+)", part)
        if not m:
            out.append(part)
            continue
        op, major, minor, patch = m.group(1), m.group(2), int(m.group(3)), int(m.group(4))
        if op in ("==", "===", "~="):
            out.append(f"=={major}.{minor}.*")
        elif op in (">=", ">"):
            out.append(f">={major}.{minor}")
        elif op in ("<", "<="):
            out.append(f"<{major}.{minor + 1}" if patch or op == "<=" else f"<{major}.{minor}")
    return ",".join(out)


def _num(v: Version | None) -> float:
    if v is None:
        return 0.0
    r = (list(v.release) + [0, 0, 0])[:3]
    return r[0] * 1e6 + r[1] * 1e3 + r[2]


# --------------------------------------------------------------------------- candidates


@dataclass(frozen=True)
class _Candidate:
    build: "FrameworkBuild"
    python: Version | None  # None: the resolver's choice
    rank: tuple[Any, ...]


def decide(matrix: "Matrix", statements: Sequence[Statement], *, host: "HostFacts | None" = None,
           platform: str | None = None) -> Decision:
    """The stack ``statements`` call for (and that runs on ``host``, when it has a GPU); raises
    :class:`NoStack` with the one line when none does."""
    d = _Decider(matrix, statements, host, platform)
    framework = d.framework()
    given_way: list[_GiveWay] = []
    for folder, other in sorted(d.elsewhere.items()):
        if other in BUILT:
            d.notes.append(f"{folder}/ holds a {other} implementation: envman project detect {folder} reads it alone")
    while True:
        versions, version_stmts = d.releases(framework)
        cuda_stmts, gpu = d.cuda(framework)
        python_stmts = d.pythons()
        try:
            candidates = _candidates(d, framework, versions, version_stmts, cuda_stmts, gpu, python_stmts)
            break
        except _GiveWay as way:
            # decide CUDA and Python again without it: what it outweighed comes back
            given_way.append(way)
            d.retake(FRAMEWORK, CUDA, PYTHON)
            for w in given_way:
                d.set_aside_for_release(w.statement, version_stmts, w.about, w.why)
        except NoStack:
            # a release a README named, that the pins' CUDA or Python cannot have, gives way to the pins
            advice = [s for s in version_stmts if not s.hard and (s.fact.companion or _is_exact(s.fact.spec))]
            if not advice:
                raise
            d.retake(FRAMEWORK, CUDA, PYTHON)
            d.done[d.position(advice[0])] = advice[0].decided(
                False, "names a release whose builds lack the CUDA or Python the pins ask for (a README is advice)")
    for s in d.of(CUDNN):
        if d.siblings_set_aside(s):
            d.mark(s, False, "on a line set aside")
        else:
            d.mark(s, True, "noted (the stack's cuDNN comes with its CUDA build)")

    first: "Stack | None" = None
    chosen: tuple["Stack", _Candidate] | None = None
    judged: "Verdict | None" = None
    failures: list[str] = []
    from envman.errors import EnvmanError

    for cand in candidates:
        try:
            stack = _resolve(matrix, cand, platform)
        except EnvmanError as exc:
            failures.append(exc.line())
            continue
        if first is None:
            first = stack
        if host is None or not host.has_gpu:
            chosen = (stack, cand)
            break
        v = _verdict(stack, host)
        if v is not None and v.runs:
            chosen, judged = (stack, cand), v
            break
    if chosen is None:
        if first is None:
            strongest = sorted((s for s in d.done.values() if s.used and s.fact.kind in (FRAMEWORK, CUDA, PYTHON)
                                and (s.fact.spec or s.fact.version or s.fact.gpu is not None)), key=_key)
            why = f" ({strongest[0].where}: {strongest[0].fact.means()})" if strongest else ""
            raise NoStack(failures[0] if failures else f"no {framework} build in the matrix fits the repository's pins{why}",
                          "give another with --stack (list them: envman matrix ls)")
        assert host is not None
        _relax(d, matrix, framework, first, host, version_stmts, cuda_stmts, platform)
    assert chosen is not None
    stack, cand = chosen
    judgement = None
    if host is not None and host.has_gpu and judged is not None:
        judgement = HostJudgement(host.summary(), judged.verdict, True, judged.reasons,
                                  first_choice=first.name if first is not None and first.name != stack.name else None)
        if first is not None and first.name != stack.name:
            fv = _verdict(first, host)
            d.notes.append(f"{first.name} does not run here ({fv.reasons[0] if fv and fv.reasons else 'verdict'}); "
                           f"{stack.name} satisfies the same pins and does")
    for s in cuda_stmts:  # a README's CUDA the chosen build does not have was a preference not met
        if not s.hard and not _fits_all([s], cand.build):
            d.done[d.position(s)] = s.decided(False, f"{stack.framework} {stack.framework_version} builds the pins "
                                                          f"allow have no {s.fact.means()} (a README is advice, not a pin)")
    alternatives = _alternatives(d, matrix, stack, candidates, host, platform)
    return Decision(stack, d.evidence(), tuple(d.conflicts), tuple(alternatives), judgement, tuple(d.notes))


def _candidates(d: _Decider, framework: str, versions: list[Version], version_stmts: list[Statement],
                cuda_stmts: list[Statement], gpu: bool | None, python_stmts: list[Statement]) -> list[_Candidate]:
    """The builds that satisfy every statement taken, best first. A pin (not prose) that no build
    of the release meets ends detection with the reason; prose that none meets is set aside."""
    matrix = d.matrix
    exact_release = any(s.fact.companion or _is_exact(s.fact.spec) for s in version_stmts)

    by_version: dict[Version, list["FrameworkBuild"]] = {}
    for b in matrix.builds:
        if b.framework == framework and (d.platform is None or d.platform in b.platforms):
            by_version.setdefault(b.version, []).append(b)

    def rows_of(version: Version) -> list["FrameworkBuild"]:
        return by_version.get(version, [])

    def cuda_fit(rows: list["FrameworkBuild"], stmts: list[Statement]) -> list["FrameworkBuild"]:
        if gpu is False or (stmts and stmts[0].fact.version is None and stmts[0].fact.spec != ">="):
            return [b for b in rows if b.cuda is None]
        pins = [s for s in stmts if s.hard]
        if stmts:
            # a README's CUDA is a preference among the builds the pins allow, never a filter
            fit = [b for b in rows if b.cuda is not None and _fits_all(pins, b)]
            return sorted(fit, key=lambda b: _fit_score(stmts, b), reverse=True)
        return [b for b in rows if b.cuda is not None] or rows

    # CUDA: a stated CUDA the release(s) have no build for
    while cuda_stmts and not any(cuda_fit(rows_of(v), cuda_stmts) for v in versions):
        hard = [c for c in cuda_stmts if c.hard]
        if not hard:
            break
        # the first pin that no build meets on its own: one already read as its major fits, and a
        # second line of the same minor (``cudatoolkit=11.3``, ``cuda-nvcc=11.3``) then takes its turn
        s = next((c for c in hard if not any(cuda_fit(rows_of(v), [c]) for v in versions)), hard[0])
        major = _same_major(s, [b for v in versions for b in rows_of(v)])
        if major is not None:
            # CUDA 11 on: a build of the same major runs what the pin's minor would (minor-version compatibility)
            sub = d.substitute(s, replace(s, fact=replace(s.fact, version=major)), True,
                               f"{framework} has no {s.fact.means()} build the pins allow: a CUDA {major}.x build runs "
                               f"the same code (CUDA's minor-version compatibility)")
            cuda_stmts = [sub if c is s else c for c in cuda_stmts]
            continue
        if d.gives_way(s, version_stmts):
            raise _GiveWay(s, "CUDA", f"gives way to the release pin: no {framework} build it allows has {s.fact.means()}")
        if s.hard:
            v0 = versions[0] if versions else None
            rows = rows_of(v0) if v0 is not None else []
            have = sorted({f"CUDA {b.cuda.major}.{b.cuda.minor}" if b.cuda else "CPU" for b in rows})
            scope = (f"{framework} {v0} has no such build" if exact_release or len(versions) == 1
                     else f"none of the {framework} releases the pins allow has such a build")
            raise NoStack(f"{s.where} asks for {s.fact.means()} ({s.text}), but {scope}"
                          + (f" (it has {', '.join(have)})" if have and (exact_release or len(versions) == 1) else ""),
                          "nearest: " + (", ".join(b.name for b in rows[-3:]) or "none") + "; give one with --stack")
        d.done[d.position(s)] = s.decided(False, f"no {framework} build the pins allow has {s.fact.means()}")
        cuda_stmts = [c for c in cuda_stmts if c is not s]

    specs = [(s, _spec(python_minor(s.fact.spec)) or SpecifierSet()) for s in python_stmts]
    exact_py = [s for s, _ in specs if _is_exact(python_minor(s.fact.spec))]
    out: list[_Candidate] = []
    for vi, version in enumerate(versions):
        fit = sorted(cuda_fit(rows_of(version), cuda_stmts), key=lambda b: (b.default, b.cuda or Version("0")), reverse=True)
        for b in sorted(fit, key=lambda b: _fit_score(cuda_stmts, b), reverse=True):
            pys = sorted(p for p in _pythons(matrix, b, d.platform) if all(_holds(sp, p) for _, sp in specs))
            if specs and not pys:
                continue
            if exact_py:
                py = next((p for p in reversed(pys) if _holds(_spec(python_minor(exact_py[0].fact.spec)) or SpecifierSet(), p)), None)
            elif specs:
                py = _py_pick(matrix, b, pys)
            else:
                py = None
            out.append(_Candidate(b, py, (vi, not b.default)))
    steer = [c for c in cuda_stmts if c.weight >= STRENGTH[COMMAND]]
    if steer and not exact_release:
        # no release named: the CUDA an install command or a pin states chooses among releases too
        # (the newest release that has it), where a sentence only chooses among one release's builds
        out.sort(key=lambda c: not _fits_all(steer, c.build))
    if not out and specs:
        soft = [s for s, _ in specs if not s.hard]
        if soft:
            for s in soft:
                d.done[d.position(s)] = s.decided(False, f"no {framework} build the pins allow has wheels for {s.fact.means()} "
                                                                 "on a base image that gives it")
            return _candidates(d, framework, versions, version_stmts, cuda_stmts, gpu, [s for s, _ in specs if s.hard])
        weaker = [s for s, _ in specs if d.gives_way(s, version_stmts)]
        if weaker:  # a base image's Python gives way to the release a requirements file pins
            raise _GiveWay(weaker[-1], "Python", f"gives way to the release pin: no {framework} build it allows has "
                                                 f"wheels for {weaker[-1].fact.means()}")
        fits = [b for v in versions for b in cuda_fit(rows_of(v), cuda_stmts)]
        limited = [s for s, sp in specs if any(_holds(sp, p) for b in fits for p in b.python)]
        if limited:
            # the wheels exist for that Python but no base image of the build gives it: envman's
            # limit, not the repository's; the stack takes the Python it can have, and says so
            for s in limited:
                d.done[d.position(s)] = s.decided(False, "the wheels have it, but no base image the matrix has gives it "
                                                         "(see the notes)")
                d.notes.append(f"{s.where} asks for {s.fact.means()}: {_have_pythons(matrix, fits[0], d.platform)}; "
                               "the stack has the Python its base gives (or give one with --stack)")
            return _candidates(d, framework, versions, version_stmts, cuda_stmts, gpu,
                               [s for s, _ in specs if s not in limited])
        s = specs[0][0]
        first = fits[0] if fits else None
        have_text = _have_pythons(matrix, first, d.platform) if first else "no build fits"
        raise NoStack(f"{s.where} asks for {s.fact.means()} ({s.text}), but {have_text}",
                      "relax the Python pin, or give another stack with --stack")
    return out


def _same_major(s: Statement, rows: Sequence["FrameworkBuild"]) -> str | None:
    """The major of an exact CUDA 11-or-later minor (``11.1``) that some of ``rows`` build for at
    another minor, else ``None``."""
    v = s.fact.version
    if not v or s.fact.spec == ">=" or "." not in v or not v.split(".")[0].isdigit():
        return None
    major = int(v.split(".")[0])
    return str(major) if major >= 11 and any(b.cuda is not None and b.cuda.major == major for b in rows) else None


def _fits_all(stmts: Sequence[Statement], b: "FrameworkBuild") -> bool:
    """Whether build ``b`` has the CUDA every statement asks for."""
    have = f"{b.cuda.major}.{b.cuda.minor}" if b.cuda is not None else None
    return all(_cuda_floor_fits(str(s.fact.version), have) if s.fact.spec == ">=" else
               _cuda_fits(_grain(s, b), have) if have else s.fact.version is None for s in stmts)


def _fit_score(stmts: Sequence[Statement], b: "FrameworkBuild") -> tuple[bool, ...]:
    """Which statements (strongest first) build ``b`` meets: the build that meets the strongest
    preference wins, then the next."""
    return tuple(_fits_all([s], b) for s in stmts)


def _grain(s: Statement, b: "FrameworkBuild") -> str | None:
    """The CUDA a statement asks of build ``b``: a base image's CUDA is only its major for a build
    whose wheels bring their own CUDA libraries (``nvidia/cuda:12.6.0-base`` under ``jax[cuda12]``
    wheels built for 12.1: only the driver comes from the host)."""
    v = s.fact.version
    if v and "nvidia/cuda" in s.notes and not b.system_cuda:
        return v.split(".")[0]
    return v


def _pythons(matrix: "Matrix", b: "FrameworkBuild", platform: str | None) -> tuple[Version, ...]:
    """The Pythons a stack of build ``b`` can have: its wheels' Pythons that one of its base
    images gives (:func:`envman.stack.resolve.stack_pythons`)."""
    from envman.stack.resolve import stack_pythons

    return stack_pythons(matrix, b, platform or b.platforms[0])


def _have_pythons(matrix: "Matrix", b: "FrameworkBuild", platform: str | None) -> str:
    """What ``b`` offers for a Python it cannot have, as the line of a refusal says it."""
    have = _pythons(matrix, b, platform)
    line = f"{b.name} has wheels for Python {', '.join(str(p) for p in b.python)} only"
    if have != b.python:
        line = (f"{b.name} has wheels for Python {', '.join(str(p) for p in b.python)}, and its base images give "
                + (", ".join(str(p) for p in have) if have else "none of them")
                + f" (python-build-standalone starts at Python {MIN_STANDALONE_PYTHON})")
    return line


def _py_pick(matrix: "Matrix", b: "FrameworkBuild", pys: list[Version]) -> Version | None:
    """The Python for a build when only ranges were stated: the resolver's own choice when it is
    allowed, else the newest allowed."""
    from envman.errors import EnvmanError
    from envman.stack.resolve import resolve_row

    try:
        default = Version(resolve_row(matrix, b).python)
    except EnvmanError:
        default = None
    if default is not None and default in pys:
        return default
    if not pys:
        return None
    return min(pys, key=lambda p: (abs(_num(p) - _num(default)), -_num(p))) if default is not None else max(pys)


def _resolve(matrix: "Matrix", cand: _Candidate, platform: str | None) -> "Stack":
    from envman.stack.resolve import resolve

    b = cand.build
    name = f"{b.framework}-{b.version}-" + (f"cuda{b.cuda.major}.{b.cuda.minor}" if b.cuda else "cpu")
    if cand.python is not None:
        name += f"-py{cand.python}"
    stack = resolve(matrix, name, platform)
    if stack.variant != b.variant:  # two variants of one CUDA (rare): the resolver picked the other
        from envman.stack.resolve import resolve_row

        stack = resolve_row(matrix, b, platform or b.platforms[0])
    return stack


def _verdict(stack: "Stack", host: "HostFacts") -> "Verdict | None":
    """The worst verdict over the host's GPUs (None when no GPU's compute capability is known)."""
    from envman.stack.verdict import verdict

    worst = None
    for g in host.gpus:
        if not g.compute_cap or host.driver is None:
            continue
        v = verdict(stack, host.driver, g.compute_cap)
        if worst is None or (worst.runs and not v.runs):
            worst = v
    return worst


def _relax(d: _Decider, matrix: "Matrix", framework: str, first: "Stack", host: "HostFacts",
           version_stmts: list[Statement], cuda_stmts: list[Statement], platform: str | None) -> None:
    """No stack within the pins runs here: name the pin that would have to relax, and the stack
    that would then run."""
    v = _verdict(first, host)
    why = v.reasons[0] if v is not None and v.reasons else "it does not run here"
    what = f"{first.name} does not run here ({host.summary()}): {why}"
    same = _nearest_running(matrix, framework, Version(first.framework_version), host, platform, same_release=True)
    if same is not None and cuda_stmts:
        s = cuda_stmts[0]
        raise NoStack(what, f"no stack within the repository's pins does; relax {s.where} ({s.fact.means()}): {same} runs here")
    alt = same or _nearest_running(matrix, framework, Version(first.framework_version), host, platform)
    pins = version_stmts or cuda_stmts
    pin = pins[0] if pins else None
    if alt is not None and pin is not None:
        raise NoStack(what, f"no stack within the repository's pins does; relax {pin.where} ({pin.fact.means()}): {alt} runs here")
    if alt is not None:
        raise NoStack(what, f"{alt} runs here (--stack {alt})")
    raise NoStack(what, f"no {framework} stack in the matrix runs on this GPU and driver; upgrade the driver")


def _nearest_running(matrix: "Matrix", framework: str, target: Version, host: "HostFacts", platform: str | None,
                     *, same_release: bool = False) -> str | None:
    """The row of ``framework`` nearest to release ``target`` that runs on ``host``: the same
    release first (another CUDA), then the newest older release, then the oldest newer one."""
    from envman.errors import EnvmanError
    from envman.stack.resolve import resolve_row

    best: tuple[Any, str] | None = None
    for b in matrix.builds:
        if b.framework != framework or b.cuda is None or (same_release and b.version != target):
            continue
        if platform is not None and platform not in b.platforms:
            continue
        try:
            cand = resolve_row(matrix, b, platform or b.platforms[0])
        except EnvmanError:
            continue
        v = _verdict(cand, host)
        if v is None or not v.runs:
            continue
        older = b.version <= target
        rank = tuple(b.version.release) if older else tuple(-p for p in b.version.release)
        key = (v.verdict == "ok", b.version == target, older, rank, b.cuda.release)
        if best is None or key > best[0]:
            best = (key, b.name)
    return best[1] if best else None


def _alternatives(d: _Decider, matrix: "Matrix", stack: "Stack", candidates: Iterable[_Candidate],
                  host: "HostFacts | None", platform: str | None) -> list[dict[str, Any]]:
    from envman.errors import EnvmanError

    out: list[dict[str, Any]] = []
    seen = {stack.name}
    for cand in list(candidates)[:12]:
        if len(out) >= 3:
            break
        try:
            s = _resolve(matrix, cand, platform)
        except EnvmanError:
            continue
        if s.name in seen:
            continue
        if host is not None and host.has_gpu:
            v = _verdict(s, host)
            if v is not None and not v.runs:
                continue
        seen.add(s.name)
        out.append({"stack": s.name, "why": "also fits the repository's pins"})
    for c in d.conflicts:
        out.append({"stack": None, "why": f"if {c['set_aside']} were taken instead of {c['taken']}"})
    return out
