"""Check that every relative link and #anchor in README.md and docs/*.md resolves: the file
exists in the repository, and an anchor names a heading of the target page (the ids MkDocs
gives headings: Python-Markdown's toc slugs, numbered when repeated). `zensical build --strict`
checks the site's own links too; this also covers the README, which the site does not build.
Prints one line per broken link and exits 1 when there is any."""
from __future__ import annotations

import re
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT_ID = re.compile(r"\{[^}]*#([\w-]+)[^}]*\}\s*$")


def slug(text: str) -> str:
    """Python-Markdown's toc slugify over the heading's text without its inline markup."""
    text = re.sub(r"`([^`]*)`", r"\1", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[*_]", "", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _prose(text: str, *, keep_code: bool = False):
    """(line number, line) outside fenced code blocks, with inline code spans blanked unless
    keep_code."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"\s*(`{3,}|~{3,})", line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1).startswith(fence):
                fence = None
            continue
        if fence is None:
            yield n, line if keep_code else re.sub(r"`[^`]*`", "", line)


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    ids: set[str] = set()
    for _, line in _prose(path.read_text(encoding="utf-8"), keep_code=True):
        m = HEADING.match(line)
        if not m:
            continue
        explicit = EXPLICIT_ID.search(m.group(2))
        if explicit:
            ids.add(explicit.group(1))
            continue
        s = slug(m.group(2))
        if s in seen:
            seen[s] += 1
            s = f"{s}_{seen[s]}"
        else:
            seen[s] = 0
        ids.add(s)
    return ids


def broken_links(files: list[Path]) -> list[str]:
    problems = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        # inline code is blanked per line, so a link is looked for in the raw line when the
        # blanked one still holds its start (code spans inside link text stay legal)
        raw = text.splitlines()
        for n, line in _prose(text):
            for m in LINK.finditer(raw[n - 1]):
                if m.group(0) not in line and "`" not in m.group(0):
                    continue
                target = m.group(1)
                if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("//"):
                    continue  # an external URL: not checked offline
                where = f"{path.relative_to(ROOT)}:{n}"
                file_part, _, anchor = target.partition("#")
                dest = (path.parent / file_part).resolve() if file_part else path
                if not dest.exists():
                    problems.append(f"{where}: {target}: no such file")
                    continue
                if ROOT not in dest.parents and dest != ROOT:
                    problems.append(f"{where}: {target}: outside the repository")
                    continue
                if anchor:
                    if dest.suffix != ".md":
                        problems.append(f"{where}: {target}: an anchor into a file that is not Markdown")
                    elif anchor not in anchors(dest):
                        problems.append(f"{where}: {target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    return problems


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


if __name__ == "__main__":
    found = broken_links(doc_files())
    for line in found:
        print(line, file=sys.stderr)
    sys.exit(1 if found else 0)
