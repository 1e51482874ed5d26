"""Every matrix snippet in the docs is a file envman loads as written: the format reference
(matrices/README.md) and every page of docs/. A snippet is a ```toml block that holds a matrix
table; its kind is its own ``kind = "..."`` line, else that of the ``## kind = "..."`` section it
is in. Parsed by the loader every matrix file goes through, with ``schema = 1`` and the kind put
first when the snippet leaves them out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envman.matrix.load import KINDS, _parse_fresh

ROOT = Path(__file__).resolve().parents[3]
#: Each matrix table, and the kind of file it belongs to.
TABLES = {"release": "cuda", "never_released": "cuda", "os": "os", "image": "images", "build": "framework",
          "gpu": "gpus", "repository": "tags", "history": "tags", "recipe": "recipes"}
_BLOCK = re.compile(r"^```toml\n(.*?)^```", re.M | re.S)
_SECTION_KIND = re.compile(r'^#+ kind = "(\w+)"', re.M)


def doc_files() -> list[Path]:
    return [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "matrices" / "README.md", ROOT / "README.md"]


def snippets() -> list[tuple[str, str, str]]:
    """(where, kind, the file's text) of every matrix snippet."""
    out = []
    for path in doc_files():
        text = path.read_text()
        for m in _BLOCK.finditer(text):
            block = m.group(1)
            tables = set(re.findall(r"^\[\[(\w+)\]\]", block, re.M))
            own = re.search(r'^kind = "(\w+)"', block, re.M)
            if not tables & set(TABLES) and own is None:
                continue
            before = _SECTION_KIND.findall(text[:m.start()])
            kind = own.group(1) if own else (before[-1] if before else TABLES[sorted(tables & set(TABLES))[0]])
            where = f"{path.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}"
            head = ("" if re.search(r"^schema = ", block, re.M) else "schema = 1\n") + \
                ("" if own else f'kind = "{kind}"\n')
            out.append((where, kind, head + block))
    return out


def test_the_docs_have_matrix_snippets_of_every_kind_but_the_framework_files_own():
    kinds = {k for _, k, _ in snippets()}
    assert kinds >= set(KINDS) - {"framework"} and "framework" in kinds


@pytest.mark.parametrize("where, kind, text", snippets(), ids=lambda v: v if ":" in str(v) and "\n" not in str(v) else "")
def test_every_matrix_snippet_in_the_docs_loads_as_written(where, kind, text):
    got, rows = _parse_fresh(where, text.encode())
    assert got == kind
    assert rows, where


def test_a_cpu_image_row_needs_no_flavour_and_a_cuda_one_does():
    from envman.errors import MatrixError

    cpu = b'schema = 1\nkind = "images"\n[[image]]\nrepository = "ubuntu"\ntag = "24.04"\nos = "ubuntu24.04"\n' \
          b'status = "published"\nsource = ["x"]\n'
    (row,) = _parse_fresh("cpu.toml", cpu)[1]
    assert row.flavour == "base" and row.cuda is None
    gpu = cpu.replace(b'os = "ubuntu24.04"', b'os = "ubuntu24.04"\ncuda = "12.4.1"')
    with pytest.raises(MatrixError, match="flavour"):
        _parse_fresh("gpu.toml", gpu)
