"""docs/img/support-matrix.png is made by scripts/support-matrix-image.py from the recorded CI report
(docs/img/support-matrix-report/): its record (docs/img/support-matrix.json) names the report, the
page rendered from it, the script and the PNG by sha256, and the test renders the page again (no
browser needed) to see that none of them moved since the image was made."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _script():
    spec = importlib.util.spec_from_file_location("support_matrix_image", ROOT / "scripts" / "support-matrix-image.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


smi = _script()


def test_the_support_matrix_image_is_made_from_the_recorded_report():
    assert smi.stale() == [], "run python scripts/support-matrix-image.py"
    record = json.loads(smi.RECORD.read_text())
    assert record["report"] == [f.relative_to(ROOT).as_posix() for f in smi.report_files()]
    for f in smi.report_files():
        assert json.loads(f.read_text()), f  # a report with rows, not an empty list


def test_every_image_in_the_docs_has_a_maker():
    # an image in docs/img/ that no script makes and records would be drawn by hand
    made = {smi.PNG.name}
    assert {p.name for p in (ROOT / "docs" / "img").glob("*.png")} == made


@pytest.fixture
def copy(tmp_path):
    report = tmp_path / "report"
    shutil.copytree(smi.REPORT, report)
    png, record = tmp_path / "s.png", tmp_path / "s.json"
    shutil.copyfile(smi.PNG, png)
    shutil.copyfile(smi.RECORD, record)
    assert smi.stale(report, png, record) == []
    return report, png, record


def test_a_new_report_makes_the_image_stale(copy):
    report, png, record = copy
    f = sorted(report.glob("*/results.json"))[0]
    rows = json.loads(f.read_text())
    rows[0]["result"] = "pass" if rows[0]["result"] != "pass" else "fail"
    f.write_text(json.dumps(rows))
    why = smi.stale(report, png, record)
    assert any(w.startswith("report_sha256") for w in why) and any(w.startswith("page_sha256") for w in why)


def test_a_report_file_added_makes_the_image_stale(copy):
    report, png, record = copy
    (report / "shard-9").mkdir()
    shutil.copyfile(sorted(report.glob("*/results.json"))[0], report / "shard-9" / "results.json")
    assert any(w.startswith("report_sha256") for w in smi.stale(report, png, record))


def test_an_image_not_made_by_the_script_is_stale(copy):
    report, png, record = copy
    png.write_bytes(png.read_bytes() + b"\0")
    assert smi.stale(report, png, record) == ["s.png is not the image the record names (png_sha256)"]


def test_a_page_rendered_otherwise_makes_the_image_stale(copy, monkeypatch):
    report, png, record = copy
    import envman.ci.report as rep

    real = rep.render_html
    monkeypatch.setattr(rep, "render_html", lambda *a, **kw: real(*a, **kw).replace("</body>", "<p>new</p></body>"))
    assert [w.split(" ")[0] for w in smi.stale(report, png, record)] == ["page_sha256"]


def test_a_missing_or_broken_record_is_stale(copy):
    report, png, record = copy
    record.write_text("{")
    assert "cannot be read" in smi.stale(report, png, record)[0]
    record.unlink()
    assert "cannot be read" in smi.stale(report, png, record)[0]
