"""Shell completion of values: stack names, project names, GPU names, flavours; and the fast path
that answers a Tab without the CLI framework.

Completion runs on every Tab, so it stays cheap: project names come from the registry (one small
JSON file); stack and GPU names come from a cache keyed like the run path's stack cache (the
matrix files' paths, sizes and mtimes and envman's version) and are computed from the matrix only
when a matrix file changed. Stack names are offered whole (``torch-2.4.1-cuda12.4-py3.10``) and
partial (``torch-2.4``, ``torch-2.4-cuda12``), with the framework spelled as typed (``tf-``
completes like ``tensorflow-``). GPU names match at the start of any of their words (``RTX``
offers ``GeForce RTX 3090``).

Starting typer costs more than a Tab may take (measured: 0.6-1.2 s per Tab through it), so
:func:`fast_complete`, called by ``envman.main`` when the shell asks (``_ENVMAN_COMPLETE``),
answers the value completions itself (a command's first argument, an option's value) in the
formats typer's completion scripts read, and leaves everything else (command and option names)
to typer. ``POSITIONAL`` and ``OPTION_VALUES`` say what each command's first argument and each
option's value is; a unit test holds them to the CLI's own declarations.

This module imports only the standard library at load time.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from typing import Any

MAX_ITEMS = 400

#: The first argument of each command path and what completes it (the CLI's declarations).
POSITIONAL: dict[tuple[str, ...], str] = {
    ("run",): "project", ("shell",): "project", ("exec",): "project", ("stop",): "project",
    ("notebook",): "project", ("lock",): "project", ("submit",): "project",
    ("export", "k8s"): "project", ("export", "devcontainer"): "project", ("export", "compose"): "project",
    ("project", "show"): "project", ("project", "rm"): "project",
    ("build",): "stack", ("render",): "stack", ("smoke",): "stack",
    ("matrix", "show"): "stack", ("matrix", "explain"): "stack",
    ("push",): "stack+project", ("pull",): "stack+project",
}
#: Options whose value completes the same way on every command that has them.
OPTION_VALUES: dict[str, str] = {"--stack": "stack", "--env": "stack", "--gpu": "gpu", "--flavour": "flavour"}
_GROUPS = frozenset(p[0] for p in POSITIONAL if len(p) == 2)
_GLOBAL_WITH_VALUE = frozenset({"--matrix", "-m"})


def _cache_path():
    from envman.paths import state_dir

    return state_dir() / "cache" / "completion.json"


def _partials(version: str) -> list[str]:
    parts = version.split(".")
    return list(dict.fromkeys([".".join(parts[:2]), version])) if len(parts) > 1 else [version]


def names_from_matrix(matrix: Any) -> dict[str, list[str]]:
    """Every stack name a user may type for the matrix's rows, and its GPU names."""
    stacks: set[str] = set()
    for b in matrix.builds:
        fw, version = b.framework, str(b.version)
        suffix = b.name[len(f"{fw}-{version}-"):] if b.name.startswith(f"{fw}-{version}-") else ""
        suffixes = [suffix] if suffix else []
        if b.cuda is not None:
            suffixes.append(f"cuda{b.cuda.release[0]}")
        arm = ["-arm64"] if "linux/arm64" in b.platforms else []
        for v in _partials(version):
            stacks.add(f"{fw}-{v}")
            for s in suffixes:
                for plat in ["", *arm]:
                    stacks.add(f"{fw}-{v}-{s}{plat}")
        for py in b.python:
            for plat in ["", *arm]:
                stacks.add(f"{b.name}-py{py}{plat}")
    gpus = sorted({g.id for g in matrix.gpus} | {g.name for g in matrix.gpus})
    return {"stacks": sorted(stacks), "gpus": gpus}


def cached_names(matrix_files: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """:func:`names_from_matrix` of this user's matrix (shipped, config, ``ENVMAN_MATRIX``, and
    ``matrix_files`` from ``--matrix``), cached under the files' fingerprint."""
    from envman.matrix.source import MatrixSource
    from envman.safefile import read_state_json

    source = MatrixSource.of(list(matrix_files)) if matrix_files else MatrixSource()
    key = source.fingerprint()
    path = _cache_path()
    try:
        data: Any = read_state_json(path, what="completion cache")  # a wrong shape is one of the errors below
        if key is not None and data.get("key") == key:
            return data["names"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    names = names_from_matrix(source.matrix)
    if key is not None:
        try:
            from envman.state import atomic_write

            atomic_write(path, json.dumps({"key": key, "names": names}))
        except OSError:
            pass
    return names


def _match(candidates: list[str], incomplete: str) -> list[str]:
    low = incomplete.lower()
    return [c for c in candidates if c.lower().startswith(low)][:MAX_ITEMS]


def stacks_for(incomplete: str, stacks: list[str]) -> list[str]:
    """Stack names starting with ``incomplete`` (``tf-2`` → ``tf-2.15``, ...)."""
    from envman.stack.names import ALIASES

    typed = incomplete.split("-", 1)[0].lower()
    fw = ALIASES.get(typed)
    if fw is not None and fw != typed and "-" in incomplete:  # tf-… completes as typed
        return _match([typed + s[len(fw):] for s in stacks if s.startswith(fw + "-")], incomplete)
    if "-" not in incomplete:  # a framework first
        return sorted(a + "-" for a in ALIASES if a.startswith(incomplete.lower()))
    return _match(stacks, incomplete)


def gpus_for(incomplete: str, gpus: list[str]) -> list[str]:
    """GPU names and ids with a word that starts with ``incomplete`` (``RTX`` → ``GeForce RTX
    3090``; ``GeForce RTX 30`` → ``GeForce RTX 3090``). Those that match as typed, case included,
    come first: ``RTX`` offers the names (``GeForce RTX 3090``) before the ids (``rtx3090``),
    ``rtx`` the ids first; then those that start with it, then those with a later word that does."""
    typed = " ".join(incomplete.split())
    if not typed:
        return gpus[:MAX_ITEMS]

    def tier(g: str) -> int | None:
        words = g.split()
        tails = [" ".join(words[i:]) for i in range(len(words))]
        for rank, fold in ((0, str), (2, str.lower)):
            if fold(g).startswith(fold(typed)):
                return rank
            if any(fold(t).startswith(fold(typed)) for t in tails[1:]):
                return rank + 1
        return None

    ranked = sorted((t, i, g) for i, g in enumerate(gpus) if (t := tier(g)) is not None)
    return [g for _, _, g in ranked][:MAX_ITEMS]


def complete_stack(incomplete: str) -> list[str]:
    try:
        return stacks_for(incomplete, cached_names()["stacks"])
    except Exception:  # noqa: BLE001 - a broken matrix completes nothing; the command will say why
        return []


def complete_gpu(incomplete: str) -> list[str]:
    try:
        return gpus_for(incomplete, cached_names()["gpus"])
    except Exception:  # noqa: BLE001
        return []


def complete_project(incomplete: str) -> list[str]:
    try:
        from envman.project.registry import read_registry

        return _match(sorted(read_registry()), incomplete)
    except Exception:  # noqa: BLE001
        return []


def complete_stack_or_project(incomplete: str) -> list[str]:
    return values("stack+project", incomplete)


def complete_flavour(incomplete: str) -> list[str]:
    from envman.stack.names import FLAVOURS

    return _match(list(FLAVOURS), incomplete)


# --------------------------------------------------------------------------- the fast path


def _split(text: str) -> list[str]:
    """The shell's words (an unfinished quote kept as typed so far), as click splits them."""
    lex = shlex.shlex(text, posix=True)
    lex.whitespace_split = True
    lex.commenters = ""
    out: list[str] = []
    try:
        for token in lex:
            out.append(token)
    except ValueError:  # an open quote: the rest is the word being typed
        out.append(lex.token)
    return out


def _words(environ: Mapping[str, str], shell: str) -> tuple[list[str], str] | None:
    """(the words after ``envman`` before the one being completed, that word), as typer reads them."""
    if shell == "complete_bash":
        words = _split(environ.get("COMP_WORDS", ""))
        try:
            cword = int(environ.get("COMP_CWORD", ""))
        except ValueError:
            return None
        return words[1:cword], (words[cword] if cword < len(words) else "")
    if shell in ("complete_zsh", "complete_fish"):
        text = environ.get("_TYPER_COMPLETE_ARGS", "")
        words = _split(text)[1:]
        if words and not text.endswith(" "):
            return words[:-1], words[-1]
        return words, ""
    return None


def _what(args: list[str], incomplete: str) -> tuple[str, tuple[str, ...]] | None:
    """What the word being completed is ("project", "stack", "gpu", "options of run", ...) and
    the ``--matrix`` files given before the command, or None when only the CLI itself can tell."""
    matrix, i = [], 0
    while i < len(args) and args[i] in _GLOBAL_WITH_VALUE:
        if i + 1 >= len(args):
            return None
        matrix.append(args[i + 1])
        i += 2
    rest = args[i:]
    if incomplete.startswith("-"):
        return _grammar_options(rest, tuple(matrix))
    return _value(rest, tuple(matrix))


def _grammar_options(rest: list[str], matrix: tuple[str, ...]) -> tuple[str, tuple[str, ...]] | None:
    """An option's name of run, shell or exec, which typer does not parse (their grammar does,
    :mod:`envman.run.grammar`): while no word has ended the options yet. Other commands' option
    names are typer's to complete."""
    from envman.run.grammar import GRAMMARS

    grammar = GRAMMARS.get(rest[0]) if rest else None
    if grammar is None:
        return None
    i = 1
    while i < len(rest):
        w = rest[i]
        if w == "--" or not w.startswith("-"):
            return None  # the project or the command has begun
        option = grammar.option(w)
        i += 2 if option is not None and option.takes_value else 1
    if i > len(rest):
        return None  # the word before is an option that takes a value: this is its value
    return f"options:{grammar.name}", matrix


def _value(rest: list[str], matrix: tuple[str, ...]) -> tuple[str, tuple[str, ...]] | None:
    if rest and rest[-1] in OPTION_VALUES:
        return OPTION_VALUES[rest[-1]], matrix
    if not rest:
        return None  # a command's name
    path = tuple(rest[:2]) if rest[0] in _GROUPS else tuple(rest[:1])
    kind = POSITIONAL.get(path)
    after = rest[len(path):]
    if kind is None or any(not w.startswith("-") for w in after) or "--" in after:
        return None  # a later argument, or an option value this table does not know
    return kind, matrix


def values(kind: str, incomplete: str, matrix: tuple[str, ...] = ()) -> list[str]:
    if kind.startswith("options:"):
        from envman.run.grammar import GRAMMARS

        flags = GRAMMARS[kind.split(":", 1)[1]].flags()
        return [f for f in flags if f.startswith("--") and f.startswith(incomplete)] or \
            [f for f in flags if f.startswith(incomplete)]
    if kind == "project":
        return complete_project(incomplete)
    if kind == "flavour":
        return complete_flavour(incomplete)
    try:
        names = cached_names(matrix)
    except Exception:  # noqa: BLE001 - a broken matrix completes nothing; the command will say why
        names = {"stacks": [], "gpus": []}
    if kind == "gpu":
        return gpus_for(incomplete, names["gpus"])
    found = stacks_for(incomplete, names["stacks"])
    return found + [p for p in complete_project(incomplete) if p not in found] if kind == "stack+project" else found


def _zsh_escape(s: str) -> str:
    return s.replace('"', '""').replace("'", "''").replace("$", "\\$").replace("`", "\\`").replace(":", r"\\:")


def fast_complete(environ: Mapping[str, str]) -> tuple[str, int] | None:
    """(what to print, exit code) for a value completion, in the format of typer's completion
    script for the shell; None when the CLI must answer (command and option names)."""
    shell = environ.get("_ENVMAN_COMPLETE", "")
    got = _words(environ, shell)
    if got is None:
        return None
    args, incomplete = got
    what = _what(args, incomplete)
    if what is None:
        return None
    found = values(what[0], incomplete, what[1])
    if shell == "complete_bash":  # one per line; a space is escaped so that the word stays one
        return "\n".join(v.replace(" ", "\\ ") for v in found), 0
    if shell == "complete_zsh":
        if not found:
            return "_files", 0
        return "_arguments '*: :((" + "\n".join(f'"{_zsh_escape(v)}"' for v in found) + "))'", 0
    if environ.get("_TYPER_COMPLETE_FISH_ACTION") == "is-args":
        return "", 0 if found else 1
    return "\n".join(found), 0
