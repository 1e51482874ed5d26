from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from envman.project.detect.repo import Repository


@pytest.fixture
def repo(tmp_path: Path):
    """``repo({"path": "text", ...})``: a repository of those files, scanned."""
    made = []

    def make(files: dict[str, str | bytes]) -> Repository:
        root = tmp_path / f"repo{len(made)}"
        root.mkdir()
        made.append(root)
        for rel, text in files.items():
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(text, bytes):
                p.write_bytes(text)
            else:
                p.write_text(textwrap.dedent(text))
        return Repository.scan(root)

    return make


def means(statements) -> list[tuple[str, int, str]]:
    return [(s.file, s.line, s.fact.means()) for s in statements]
