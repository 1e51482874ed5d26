"""No module of envman is over :data:`LIMIT` lines: a module that grows past it holds a second
noun, which goes to a module of its own (as ``render/sections.py`` left ``render/plan.py``).

:data:`ALLOWED` names the modules that are over the limit today, each with what it holds; an
entry whose module is back under the limit (or gone) fails too, so the list only shrinks."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "envman"
LIMIT = 600

#: module (relative to the repository) -> what it holds that keeps it over the limit for now
ALLOWED = {
    "envman/project/detect/decide.py": "the ordered rules that take a repository's statements to one stack, "
                                       "each with its reason, in one pass",
}


def lines(path: Path) -> int:
    """The lines of a file as an editor counts them (a last line without a newline counts)."""
    return len(path.read_text(encoding="utf-8").splitlines())


def oversized(package: Path, limit: int = LIMIT) -> dict[str, int]:
    """Each Python module under ``package`` longer than ``limit`` lines, by its path from the root."""
    return {str(f.relative_to(package.parent)): n for f in sorted(package.rglob("*.py"))
            if "__pycache__" not in f.parts and (n := lines(f)) > limit}


def test_no_module_is_over_the_limit_unless_listed():
    over = oversized(PACKAGE)
    unlisted = {m: n for m, n in over.items() if m not in ALLOWED}
    assert not unlisted, (f"modules over {LIMIT} lines (move the second noun they hold to a module of its own): "
                          + ", ".join(f"{m} ({n})" for m, n in sorted(unlisted.items())))


def test_every_listed_module_is_still_over_the_limit():
    over = oversized(PACKAGE)
    stale = sorted(m for m in ALLOWED if m not in over)
    assert not stale, "modules no longer over the limit (or gone): remove them from ALLOWED: " + ", ".join(stale)


def test_each_listed_module_says_what_it_holds_in_one_line():
    for module, reason in ALLOWED.items():
        assert module.startswith("envman/") and module.endswith(".py"), module
        assert reason.strip() and "\n" not in reason and len(reason) <= 160, module


@pytest.mark.parametrize("count, newline_at_end, over", [
    (LIMIT, True, False),  # exactly at the limit
    (LIMIT, False, False),
    (LIMIT + 1, True, True),  # one past it
    (LIMIT + 1, False, True),  # the last line counts without its newline
])
def test_the_limit_is_exact(tmp_path, count, newline_at_end, over):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    text = "\n".join(f"x{i} = {i}" for i in range(count)) + ("\n" if newline_at_end else "")
    (package / "sub" / "mod.py").write_text(text)
    (package / "small.py").write_text("x = 1\n")
    (package / "sub" / "__pycache__").mkdir()
    (package / "sub" / "__pycache__" / "big.py").write_text("x = 1\n" * (LIMIT * 2))  # not a module
    assert oversized(package) == ({"pkg/sub/mod.py": count} if over else {})
