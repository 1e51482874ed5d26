"""The front door and the documentation site: the README stays short and runs what CI runs, every
page is in the site's nav, every relative link and anchor resolves, and the support table of
docs/matrix.md is the shipped matrix's."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"), ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


links = _script("check-doc-links")


def test_readme_is_a_front_door():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) < 250


def test_readme_test_commands_are_what_ci_runs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    ci_runs = re.findall(r"^run_pytest (.*?) \|\|", ci, re.M)
    assert ci_runs, "no pytest call in .ci/run"
    documented = re.findall(r"^\.venv/bin/python -m pytest (.*?)\s+#", readme, re.M)
    assert documented == ci_runs


def _nav_pages() -> list[str]:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:"):]
    return re.findall(r":\s+(\S+\.md)\s*$", nav, re.M)


def test_every_page_is_in_the_nav_and_every_nav_entry_exists():
    pages = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md"))
    nav = _nav_pages()
    assert sorted(nav) == pages
    assert len(nav) == len(set(nav))


def test_every_relative_link_and_anchor_resolves():
    assert links.broken_links(links.doc_files()) == []


@pytest.mark.parametrize("link, problem", [
    ("[a](nowhere.md)", "no such file"),
    ("[a](other.md#no-such-heading)", "no heading #no-such-heading"),
    ("[a](#not-here)", "no heading #not-here"),
    ("![a](img/none.png)", "no such file"),
    ("[a](other.txt#x)", "not Markdown"),
])
def test_a_broken_link_is_reported(tmp_path, monkeypatch, link, problem):
    monkeypatch.setattr(links, "ROOT", tmp_path)
    (tmp_path / "other.md").write_text("# Other\n\n## A heading: with `code`\n")
    (tmp_path / "other.txt").write_text("x")
    page = tmp_path / "page.md"
    page.write_text(f"# Page\n\ntext {link} text\n")
    found = links.broken_links([page])
    assert len(found) == 1 and problem in found[0] and found[0].startswith("page.md:3:")


@pytest.mark.parametrize("link", [
    "[a](other.md)", "[a](other.md#a-heading-with-code)", "[a](#page)", "[a](https://example.org/x#y)",
    "`[a](nowhere.md)`",  # in a code span: not a link
])
def test_a_good_link_or_code_is_not_reported(tmp_path, monkeypatch, link):
    monkeypatch.setattr(links, "ROOT", tmp_path)
    (tmp_path / "other.md").write_text("# Other\n\n## A heading: with `code`\n")
    page = tmp_path / "page.md"
    page.write_text(f"# Page\n\ntext {link} text\n\n```\n[b](fenced.md)\n```\n")
    assert links.broken_links([page]) == []


@pytest.mark.parametrize("heading, slug", [
    ("Keeping it current: `envman matrix update`", "keeping-it-current-envman-matrix-update"),
    ("Build, smoke test, promote", "build-smoke-test-promote"),
    ("No Docker Hub here? A mirror or a rebuilt base", "no-docker-hub-here-a-mirror-or-a-rebuilt-base"),
    ("Stacks: names — verdicts", "stacks-names-verdicts"),
])
def test_anchor_slugs_are_mkdocs_ids(heading, slug):
    assert links.slug(heading) == slug


def test_support_table_is_the_matrix():
    table = _script("support-table")
    assert table.documented() == table.support_table(), "regenerate: python scripts/support-table.py --write"


#: The Mermaid script the site ships (npm's mermaid 12.3.0, dist/mermaid.min.js: the major the theme asks for), by sha256.
MERMAID = ("docs/assets/mermaid/mermaid.min.js", "336df803d87a38b70a01e736e666c8f7601d2ce42f5e47c8fafe5d721074b9a3")


def test_the_diagrams_draw_without_a_network():
    """The theme fetched Mermaid from a CDN: offline, the diagrams showed as their source. The
    site ships the script (with its licence) and loads it on every page, so the theme never
    fetches one; no script the site loads comes from another host."""
    import hashlib

    path, digest = MERMAID
    assert hashlib.sha256((ROOT / path).read_bytes()).hexdigest() == digest
    assert (ROOT / path).with_name("LICENSE").read_text().startswith("The MIT License")
    block = re.search(r"^extra_javascript:\n((?:  - .*\n)+)", (ROOT / "mkdocs.yml").read_text(), re.M)
    scripts = [line.strip()[2:].strip() for line in block.group(1).splitlines()] if block else []
    assert "assets/mermaid/mermaid.min.js" in scripts and not any("://" in s for s in scripts)
    pages = [p for p in (ROOT / "docs").rglob("*.md") if "```mermaid" in p.read_text()]
    assert pages  # what this guards exists


def test_ci_builds_the_docs_strictly_with_a_maintained_tool():
    """mkdocs-material printed its own end-of-life notice on every build: the site is built by its
    successor, strictly (a broken link or anchor fails CI), and the link check still runs."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert "zensical build --strict" in ci and "scripts/check-doc-links.py" in ci and "mkdocs build" not in ci
    extra = re.search(r"^docs = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text(), re.M | re.S).group(1)
    assert "zensical" in extra and "mkdocs-material" not in extra


COUNT_OF_TESTS = re.compile(r"\b\d[\d,]*\s+(?:unit |integration |docker |GPU )?tests?\b(?!/)|\btests passed\b", re.I)


@pytest.mark.parametrize("text, stale", [
    ("the suite has 2,141 tests", True), ("8400 unit tests", True), ("| tree | tests passed |", True),
    ("1 test", True), ("runs the tests in 40 s", False), ("8 tests/unit/engine/test_api.py", False),
    ("tests 3 frameworks", False),
])
def test_a_count_of_tests_is_found(text, stale):
    assert bool(COUNT_OF_TESTS.search(text)) is stale


def test_no_page_states_how_many_tests_there_are():
    # a count written by hand is stale at the next commit; pytest --collect-only says it
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            assert not COUNT_OF_TESTS.search(line), f"{page.relative_to(ROOT)}:{n}: {line.strip()}"
