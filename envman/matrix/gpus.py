"""Find a GPU of the matrix by the name a user types or ``nvidia-smi`` prints.

Matching is by rule, not by a list of spellings: a name becomes a set of tokens (case, spaces,
dashes and brand words do not count: ``NVIDIA GeForce RTX 4090``, ``rtx4090`` and ``RTX-4090``
are the same tokens), then

1. the tokens of the query equal those of a GPU's name, id or alias;
2. else they do once the board details ``nvidia-smi`` appends are set aside (memory size
   ``80GB`` or ``144G``, memory type ``HBM3``, form factor ``SXM4``/``PCIe``/``NVL``/``Laptop``/``with Max-Q
   Design``, and the board letter glued to a model number: ``Tesla K40m``/``K40c`` are boards of
   the ``K40``): among
   several GPUs that differ only there (A100 40GB and 80GB), the one sharing most of those details
   wins, and a GPU of another form factor loses to one without (a laptop GPU the list lacks is
   its desktop chip: same compute capability); among those still equal, the plain board wins:
   the one with the fewest form factors, then details, the query does not name (``RTX A1000``
   is neither ``RTX A1000 Laptop GPU`` nor ``RTX A1000 6GB Laptop GPU`` when both are listed and
   the desktop board is not, but the first of them);
3. else the query is a short form (``4090``, ``L40S``, ``rtx 3060``): the GPUs whose tokens
   include all of the query's, and the one whose name has the fewest other words (board details
   aside) wins.

A tie at any step is no answer (the caller suggests the tied names). :func:`suggestions` offers
names on a miss: GPUs sharing the query's model number, then close spellings (difflib).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Generic, Iterable, Protocol, Sequence, TypeVar

#: Words that name the maker or the product line, not the GPU.
NOISE = frozenset({"nvidia", "geforce", "tesla", "quadro", "generation", "gpu", "graphics", "edition", "card",
                   "with", "design"})  # "with Max-Q Design": the words around the form factor
#: Board details nvidia-smi appends to a GPU's name (memory type, form factor).
DETAIL_WORDS = frozenset({
    "hbm", "hbm2", "hbm2e", "hbm3", "hbm3e", "gddr5", "gddr5x", "gddr6", "gddr6x", "gddr7",
    "sxm", "sxm2", "sxm3", "sxm4", "sxm5", "sxm6", "pcie", "nvl", "fhhl", "oam", "mezzanine", "laptop", "maxq",
})
#: Detail words that name a form factor: a GPU of another form factor is a worse match.
FORM_FACTORS = frozenset({"sxm", "sxm2", "sxm3", "sxm4", "sxm5", "sxm6", "pcie", "nvl", "oam", "mezzanine", "laptop",
                          "maxq", *(f"board-{b}" for b in "mc")})
#: A board letter nvidia-smi glues to a model number (``K40m``: passive server board, ``K40c``:
#: workstation board with a fan). Set aside only after an exact match failed, so a GPU whose own
#: name ends so (``GeForce GTX 960M``) is found by step 1.
_BOARD_LETTER = re.compile(r"^([a-z]*\d+[a-z]?)([mc])$")
#: Letter prefixes written together with a model number (``rtx4090``, ``gh200``).
SERIES = ("rtx", "gtx", "gts", "gt", "mx", "gh", "gb", "gp", "gv", "tk")
#: Suffixes written together with a model number (``1080ti``, ``80gb``, ``4070super``).
SUFFIXES = ("super", "ti", "gb")
#: Words written differently for the same thing.
SYNONYMS = {"mobile": "laptop", "fhhl": "pcie"}

_WORD = re.compile(r"[a-z0-9]+")
#: A memory size written with G alone, as nvidia-smi prints some boards (``GH200 144G HBM3e``).
_SIZE_G = re.compile(r"^(\d+)g$")
_SPLIT_SERIES = re.compile(r"^(%s)(\d\w*)$" % "|".join(SERIES))
_SPLIT_SUFFIX = re.compile(r"^(\w*\d)(%s)$" % "|".join(SUFFIXES))


def tokens(name: str) -> tuple[str, ...]:
    """The words of ``name`` that identify a GPU, in order (see the module docstring)."""
    text = name.lower().replace("max-q", "maxq")
    out: list[str] = []
    for word in _WORD.findall(text):
        parts = [word]
        m = _SPLIT_SERIES.match(word)
        if m:
            parts = [m.group(1), m.group(2)]
        m = _SPLIT_SUFFIX.match(parts[-1])
        if m and not m.group(1).isalpha():
            parts[-1:] = [m.group(1), m.group(2)]
        m = _SIZE_G.match(parts[-1])
        if m:
            parts[-1:] = [m.group(1), "gb"]
        out.extend(SYNONYMS.get(p, p) for p in parts if p not in NOISE)
    return tuple(out)


def split_details(toks: Sequence[str]) -> tuple[frozenset[str], frozenset[str]]:
    """(core tokens, board-detail tokens): a memory size (``80 gb``), memory type or form factor
    is a detail."""
    core: list[str] = []
    details: list[str] = []
    for i, t in enumerate(toks):
        nxt = next((x for x in toks[i + 1:] if not x.isdigit()), "")  # "16/32 GB": both are sizes
        model_number = i > 0 and toks[i - 1] in SERIES  # "gh 200" of GH200, not a size
        board = _BOARD_LETTER.match(t)
        if t in DETAIL_WORDS or (t == "gb" and i > 0 and toks[i - 1].isdigit()) or (t.isdigit() and nxt == "gb" and not model_number):
            details.append(t)
        elif board and any(ch.isalpha() for ch in board.group(1)):  # "k40m" (not "960m": a bare number)
            core.append(board.group(1))
            details.append(f"board-{board.group(2)}")
        else:
            core.append(t)
    return frozenset(core), frozenset(details)


class Named(Protocol):
    """What the index reads of a GPU (``envman.matrix.model.Gpu``)."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def aliases(self) -> tuple[str, ...]: ...


G = TypeVar("G", bound=Named)


@dataclass(frozen=True)
class _Entry(Generic[G]):
    key: G  # what the caller gets back (a Gpu)
    names: tuple[tuple[str, ...], ...]  # token tuples of its name, id and aliases


class GpuIndex(Generic[G]):
    """The three matching steps over a fixed list of GPUs (built once per matrix)."""

    def __init__(self, gpus: Iterable[G]) -> None:
        self.entries = [_Entry(g, tuple(tokens(n) for n in (g.name, g.id, *g.aliases))) for g in gpus]
        self.display = [(g.name, g) for g in gpus]

    def lookup(self, query: str) -> G | None:
        found, _ = self._find(query)
        return found

    def ambiguous(self, query: str) -> list[G]:
        """The GPUs a query ties between (empty when it finds one or none)."""
        return self._find(query)[1]

    def _find(self, query: str) -> tuple[G | None, list[G]]:
        q = tokens(query)
        if not q:
            return None, []
        qset = frozenset(q)
        exact = [e.key for e in self.entries if any(frozenset(n) == qset for n in e.names)]
        if exact:
            return self._unique(exact)
        qcore, qdet = split_details(q)
        if qcore:
            best: dict[tuple[int, int, int], list[G]] = {}
            qff = qdet & FORM_FACTORS
            for e in self.entries:
                # details shared, less a form factor other than the query's; among equals the plain
                # board (fewest form factors, then details, the query does not name) wins
                score = max(((len(qdet & d) - bool(qff and (d & FORM_FACTORS) - qff),
                              -len((d & FORM_FACTORS) - qff), -len(d - qdet))
                             for c, d in map(split_details, e.names) if c == qcore), default=None)
                if score is not None:
                    best.setdefault(score, []).append(e.key)
            if best:
                return self._unique(best[max(best)])
        extra: dict[tuple[int, int], list[G]] = {}
        for e in self.entries:  # fewest words besides, on the GPU's name: model words, then details
            if any(qset <= set(n) for n in e.names):
                core, det = split_details(e.names[0])
                extra.setdefault((len(core - qset), len(det - qset)), []).append(e.key)
        if extra:
            return self._unique(extra[min(extra)])
        return None, []

    @staticmethod
    def _unique(keys: list[G]) -> tuple[G | None, list[G]]:
        """(the one GPU, []) or (None, the GPUs it ties between), of a non-empty list."""
        uniq = list(dict.fromkeys(keys))
        return (uniq[0], []) if len(uniq) == 1 else (None, uniq)

    def suggestions(self, query: str, n: int = 4) -> list[str]:
        """Up to ``n`` GPU names for a query that found none: the GPUs it ties between, those that
        share its model number (a token with a digit), then close spellings."""
        out: list[str] = [g.name for g in self.ambiguous(query)]
        q = tokens(query)
        numbers = {t for t in q if any(ch.isdigit() for ch in t) and len(t) >= 2}
        if numbers:
            sharing = [(len(set(q) & set(e.names[0])), e.key.name) for e in self.entries if numbers & set(e.names[0])]
            out += [name for _, name in sorted(sharing, key=lambda x: (-x[0], x[1]))]
        flat = {" ".join(tokens(name)): name for name, _ in self.display}
        out += [flat[c] for c in difflib.get_close_matches(" ".join(q), list(flat), n=n, cutoff=0.5)]
        return list(dict.fromkeys(out))[:n]


def unknown_gpu(index: GpuIndex[G], query: str) -> tuple[str, str]:
    """(what, fix) of the one-line error for a ``--gpu`` that names no one GPU of the matrix. A
    name several GPUs answer to (boards of one name made with chips of different compute
    capabilities: ``GeForce GT 1030``) lists them with their compute capabilities."""
    tied = index.ambiguous(query)
    ccs = [str(cc) for g in tied if (cc := getattr(g, "cc", None)) is not None]
    if tied and len(ccs) == len(tied):
        what = f"GPU {query!r} names several GPUs: " + ", ".join(f"{g.name} is {cc}" for g, cc in zip(tied, ccs))
        return what, "give the one you have by that name, or its compute capability: " + " or ".join(
            f"--sm {cc}" for cc in dict.fromkeys(ccs)) + " (nvidia-smi --query-gpu=compute_cap prints it)"
    close = index.suggestions(query)
    what = f"GPU {query!r} names several GPUs" if tied else f"unknown GPU {query!r}"
    return what, ("did you mean " + ", ".join(close) + "? " if close else "") + "or give --sm X.Y"


__all__ = ["tokens", "split_details", "GpuIndex", "unknown_gpu"]
