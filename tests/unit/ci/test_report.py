"""``envman report``: merging shards, the support grid, the HTML page and the Markdown summary."""

import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from envman.ci import report as R
from envman.errors import UserError
from tests.support.cli import run_envman

from tests.unit.conftest import DATA

ROOT = Path(__file__).resolve().parents[3]
RECORDED = DATA / "report"


def result(row, result, *, fw="torch", ver=None, cuda=None, variant=None, shard="1/2", finished="2024-05-01T10:00:00+00:00",
           reason="", probe=None):
    ver = ver or row.split("-")[1]
    return {
        "row": row, "framework": fw, "framework_version": ver, "variant": variant or (f"cu{cuda.replace('.', '')}" if cuda else "cpu"),
        "cuda": cuda, "name": f"{row}-py3.11", "result": result, "reason": reason or f"{result} because",
        "steps": {"validate": {"status": "pass", "seconds": 0.01, "message": "", "detail": "", "data": {}},
                  "smoke": {"status": result if result in ("pass", "cpu-only", "fail") else "not-buildable", "seconds": 3.0,
                            "message": reason, "detail": "", "data": {}}},
        "stack": {"name": f"{row}-py3.11", "base_image": "ubuntu:22.04"}, "probe": probe, "shard": shard,
        "runner": {"hostname": "ci-1", "gpu": False}, "started": finished, "finished": finished, "accepted": result != "fail",
    }


def shard_dirs(tmp_path):
    a, b = tmp_path / "shard-1", tmp_path / "shard-2"
    a.mkdir()
    b.mkdir()
    (a / "results.json").write_text(json.dumps([
        result("torch-2.4.1-cpu", "cpu-only"),
        result("torch-2.4.1-cuda12.4", "pass", cuda="12.4"),
        result("torch-1.0.0-cuda10.0", "not-buildable", cuda="10.0", reason="base image deleted upstream"),
    ]))
    (b / "results.json").write_text(json.dumps([
        result("torch-2.4.1-cuda11.8", "fail", cuda="11.8", shard="2/2"),
        result("tensorflow-2.15.0-cpu", "pass", fw="tensorflow", shard="2/2"),
        # a rerun of a row from shard 1: the later result wins
        result("torch-2.4.1-cpu", "pass", shard="2/2", finished="2024-05-01T11:00:00+00:00"),
    ]))
    return a, b


def test_merge_of_several_shards_keeps_every_row_once_and_the_latest_rerun(tmp_path):
    a, b = shard_dirs(tmp_path)
    loaded = R.load_results([a, b / "results.json"])  # a directory or the file itself
    rows = {r["row"]: r for r in loaded.results}
    assert len(loaded.results) == 5
    assert rows["torch-2.4.1-cpu"]["result"] == "pass"
    assert loaded.notes == ["torch-2.4.1-cpu appears in several results; the latest is shown"]
    # order of the arguments does not matter for which result wins
    assert {r["row"]: r["result"] for r in R.load_results([b, a]).results} == {k: v["result"] for k, v in rows.items()}


def test_missing_or_foreign_results_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="no results found"):
        R.load_results([tmp_path])
    (tmp_path / "results.json").write_text('{"hello": 1}')
    with pytest.raises(UserError, match="not an envman ci results file"):
        R.load_results([tmp_path])


def test_grid_framework_versions_down_cuda_across(tmp_path, mini):
    loaded = R.load_results(shard_dirs(tmp_path))
    tables = {t.framework: t for t in R.support_tables(loaded.results, mini)}
    torch = tables["torch"]
    assert torch.columns == ["cpu", "10.0", "11.8", "12.4"]
    assert [v for v, _ in torch.rows] == ["2.4.1", "1.0.0"]  # newest first
    states = {(v, c.column): c.state for v, cells in torch.rows for c in cells}
    assert states[("2.4.1", "cpu")] == "pass"
    assert states[("2.4.1", "11.8")] == "fail"
    assert states[("1.0.0", "10.0")] == "not-buildable"
    assert states[("1.0.0", "cpu")] == "not-in-matrix"  # the mini matrix has no torch 1.0.0 CPU row
    assert states[("2.4.1", "10.0")] == "not-in-matrix"
    assert list(tables) == ["torch", "tensorflow"]


def test_rows_in_the_matrix_without_results_are_not_tested_not_missing(tmp_path, mini):
    only = tmp_path / "one"
    only.mkdir()
    (only / "results.json").write_text(json.dumps([result("torch-2.4.1-cpu", "pass"), result("torch-1.0.0-cuda10.0", "pass", cuda="10.0")]))
    (torch,) = R.support_tables(R.load_results([only]).results, mini)
    states = {(v, c.column): c.state for v, cells in torch.rows for c in cells}
    assert states[("1.0.0", "10.0")] == "pass"
    assert ("2.4.1", "12.4") not in states  # CUDA 12.4 has no result: no column unless --full-matrix
    (full,) = R.support_tables(R.load_results([only]).results, mini, full_matrix=True)
    states = {(v, c.column): c.state for v, cells in full.rows for c in cells}
    assert states[("2.4.1", "12.4")] == "not-tested" and states[("1.0.1", "10.0")] == "not-tested"
    assert states[("2.4.1", "cpu")] == "pass"


def test_a_cell_with_several_variants_shows_the_worst():
    rs = [result("tensorflow-2.15.0-cuda12.2", "pass", fw="tensorflow", cuda="12.2", variant="and-cuda"),
          result("tensorflow-2.15.0-cuda12.2b", "fail", fw="tensorflow", ver="2.15.0", cuda="12.2", variant="gpu")]
    (t,) = R.support_tables(rs)
    ((_, (cell,)),) = t.rows
    assert cell.state == "fail" and [e.result for e in cell.entries] == ["pass", "fail"]


class Cells(HTMLParser):
    """Collects td.cell and button.entry attributes, and external references."""

    def __init__(self):
        super().__init__()
        self.cells, self.entries, self.external, self.legend = [], [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "td" and "cell" in a.get("class", ""):
            self.cells.append(a)
        if tag == "button" and "entry" in a.get("class", ""):
            self.entries.append(a)
        if tag == "li" and "data-state" in a:
            self.legend.append(a["data-state"])
        for key in ("src", "href"):
            if a.get(key) and re.match(r"^(https?:)?//", a[key]):
                self.external.append((tag, a[key]))
        if tag == "link":
            self.external.append((tag, a.get("href")))


def test_html_cells_match_the_results_and_the_page_is_self_contained(tmp_path, mini):
    loaded = R.load_results(shard_dirs(tmp_path))
    page = R.render_html(loaded.results, matrix=mini, sources=loaded.sources, notes=loaded.notes)
    p = Cells()
    p.feed(page)
    by_row = {e["data-row"]: e["data-result"] for e in p.entries}
    assert by_row == {r["row"]: r["result"] for r in loaded.results}
    cells = {(c["data-framework"], c["data-version"], c["data-cuda"]): c["data-result"] for c in p.cells}
    assert cells[("torch", "2.4.1", "11.8")] == "fail"
    assert cells[("torch", "1.0.0", "cpu")] == "not-in-matrix"
    assert cells[("tensorflow", "2.15.0", "cpu")] == "pass"
    assert p.external == []
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    # accessible: a legend naming every state in words, cell text not only colour
    assert p.legend == list(R.LEGEND) and set(R.LEGEND) == set(R.STATES)
    for label in R.LABELS.values():
        assert label in page
    assert '<th scope="col">CUDA 11.8</th>' in page and '<th scope="row">2.4.1</th>' in page
    data = json.loads(re.search(r'<script type="application/json" id="envman-data">(.*?)</script>', page, re.S).group(1))
    assert set(data["rows"]) == set(by_row)


def test_html_escapes_hostile_values(tmp_path):
    evil = result("torch-2.4.1-cpu", "fail", reason='</script><script>alert(1)</script> & "quotes"')
    evil["name"] = '<img src=x onerror=alert(1)>'
    page = R.render_html([evil])
    assert "<script>alert(1)" not in page and "<img src=x" not in page
    blob = re.search(r'<script type="application/json" id="envman-data">(.*?)</script>', page, re.S).group(1)
    assert json.loads(blob)["rows"]["torch-2.4.1-cpu"]["reason"].startswith("</script>")


def test_markdown_summary(tmp_path):
    loaded = R.load_results(shard_dirs(tmp_path))
    md = R.markdown_summary(loaded.results, sources=loaded.sources)
    assert md.startswith("# envman CI validation\n")
    assert "5 rows: ✓ 3 pass, ◐ 0 CPU only, ✗ 1 fail, ⊘ 1 not buildable here." in md
    assert "| version | CPU | CUDA 10.0 | CUDA 11.8 | CUDA 12.4 |" in md
    assert "| 2.4.1 | ✓ pass | — not in matrix | ✗ fail | ✓ pass |" in md
    rows = [line for line in md.splitlines() if line.startswith("| torch-") or line.startswith("| tensorflow-")]
    assert rows[0].startswith("| torch-2.4.1-cuda11.8 |")  # failures first
    assert R.markdown_summary([]).rstrip().endswith("No rows were validated.")


def test_recorded_results_render(tmp_path):
    """The recorded results in tests/data/report (two shards of a real run) still load and render."""
    dirs = sorted(p for p in RECORDED.iterdir() if p.is_dir())
    loaded = R.load_results(dirs)
    assert {r["result"] for r in loaded.results} >= {"cpu-only", "fail", "not-buildable"}
    page = R.render_html(loaded.results)
    p = Cells()
    p.feed(page)
    assert {e["data-row"]: e["data-result"] for e in p.entries} == {r["row"]: r["result"] for r in loaded.results}


def test_cli_report_writes_html_and_markdown(tmp_path):
    a, b = shard_dirs(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "ENVMAN_MATRIX"}
    p = run_envman(["report", str(a), str(b), "--html", str(tmp_path / "m.html"),
                    "--markdown", str(tmp_path / "m.md"), "--merged", str(tmp_path / "all.json")], env=env, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "m.html").read_text().startswith("<!DOCTYPE html>")
    assert "| torch-2.4.1-cuda11.8 |" in (tmp_path / "m.md").read_text()
    assert len(json.loads((tmp_path / "all.json").read_text())) == 5
    p = run_envman(["report", str(tmp_path / "nowhere")], env=env, cwd=ROOT)
    assert p.returncode == 2 and p.stderr.count("\n") == 1


def test_full_matrix_grids_scroll_in_their_column_and_the_details_keep_cuda(tmp_path, mini):
    """A wide --full-matrix grid must not run under the details panel (which hid its CUDA
    columns): every grid sits in a horizontally scrolling box, and an untested row's details
    carry its CUDA, cuDNN and driver facts."""
    rs = [result("torch-2.4.1-cpu", "pass")]
    page = R.render_html(rs, matrix=mini, full_matrix=True)
    grids = re.findall(r'<div class="grid-scroll">\s*<table class="grid"', page)
    assert grids and len(grids) == page.count('<table class="grid"')
    assert re.search(r"\.grid-scroll \{[^}]*overflow-x: auto", page)
    assert "minmax(0, 1fr) 440px" in page  # the grid column may shrink below its table's width
    data = json.loads(re.search(r'(\{"rows".*?)</script>', page, re.S).group(1))
    untested = data["untested"]["torch-2.4.1-cuda12.4"]["stack"]
    assert untested["cuda"] == "12.4" and untested["min_driver"]


def test_the_legend_holds_for_cpu_rows_too():
    """A CPU row passes without a GPU: the legend may not say a pass needs one (it did), and
    cpu-only (a CUDA row tested without a GPU) says which rows it is about."""
    assert "CPU row" in R.MEANINGS["pass"] and not R.MEANINGS["pass"].endswith("passed on a GPU")
    assert "CUDA row" in R.MEANINGS["cpu-only"]
    for state, meaning in R.MEANINGS.items():
        assert meaning and "\n" not in meaning, state


MARKDOWN_SYNTAX = ["[Click to fix](https://evil.example)", "![i](http://evil.example/t.png)", "*em* **strong**",
                   "_u_ __b__", "~~s~~", "`code`", "# heading", "<b>raw</b>", "a | b", "\\* escaped",
                   "[ref]: https://evil.example", "<https://evil.example>"]


@pytest.mark.parametrize("text", MARKDOWN_SYNTAX)
def test_markdown_syntax_from_results_is_printed_as_text(text):
    """By rule: in a cell, every character Markdown gives an inline meaning is escaped, so no link,
    image, emphasis, code span, heading or raw HTML from a results file renders."""
    import re

    from envman.ci.report import _md

    out = _md(text)
    assert not re.search(r"(?<!\\)(?:\\\\)*[\[\]()!*_~`#|<>]", out.replace("&lt;", "").replace("&gt;", "")), out
    assert "<" not in out


# --------------------------------------------------------------------------- every field of a row, by rule

WRONG = {"a number": 1e400, "a list": ["x"], "a table": {"x": 1}, "a boolean": True}


@pytest.mark.parametrize("kind", sorted(WRONG))
@pytest.mark.parametrize("key", [*R.ROW_TEXT, *sorted(R.ROW_OPTIONAL)])
def test_a_row_field_of_the_wrong_kind_is_one_line_naming_the_row(tmp_path, key, kind):
    good = result("torch-2.4.1-cpu", "pass")
    assert R.load_results([_write(tmp_path / "ok", [good])]).results == [good]
    if key in R.ROW_OPTIONAL and isinstance(WRONG[kind], R.ROW_OPTIONAL[key]):
        return  # the right kind for this field
    bad = {**good, key: WRONG[kind]}
    with pytest.raises(UserError) as e:
        R.load_results([_write(tmp_path / "bad", [good, bad])])
    assert e.value.what.startswith(f"row result 2: {key} is {kind}") and "\n" not in str(e.value)
    assert "1e" not in str(e.value) and "inf" not in str(e.value)  # the value is not shown


@pytest.mark.parametrize("key", R.ROW_TEXT)
def test_a_row_without_a_text_field_is_refused(tmp_path, key):
    bad = {k: v for k, v in result("torch-2.4.1-cpu", "pass").items() if k != key}
    with pytest.raises(UserError):
        R.load_results([_write(tmp_path, [bad])])


@pytest.mark.parametrize("state", [*R.STATES, "passed", "", "PASS"])
def test_a_result_is_one_of_the_states(tmp_path, state):
    row = result("torch-2.4.1-cpu", "pass")
    row["result"] = state
    if state in R.STATES:
        assert R.load_results([_write(tmp_path, [row])]).results == [row]
    else:
        with pytest.raises(UserError, match="not one of"):
            R.load_results([_write(tmp_path, [row])])


def test_an_integer_too_long_for_python_is_one_line(tmp_path):
    (tmp_path / "results.json").write_text('[{"row": ' + "9" * 5000 + ', "result": "pass"}]')
    with pytest.raises(UserError, match="not valid JSON"):
        R.load_results([tmp_path])


def test_the_recorded_shards_pass_the_rule():
    assert len(R.load_results(sorted(RECORDED.glob("shard-*"))).results) > 0


def _write(d: Path, rows) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "results.json").write_text(json.dumps(rows))
    return d
