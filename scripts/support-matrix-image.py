#!/usr/bin/env python3
"""docs/img/support-matrix.png from a real CI report, and the record that says what it shows.

    python scripts/support-matrix-image.py                      # render the recorded report
    python scripts/support-matrix-image.py --report DIR ...     # record these reports first, then render
    python scripts/support-matrix-image.py --check              # exit 1 when the image is stale

The report is what ``envman ci run --report DIR`` wrote (``results.json``), kept in
``docs/img/support-matrix-report/`` so that the image can be made again from it. The page is the
one ``envman report --html`` writes for those results (``envman.ci.report.render_html``; without
the matrix, whose rows change daily, so that the picture shows the report's rows), dated by the
report's last result; a headless Chromium (Debian's ``chromium``) takes the screenshot with one
row's details open.

``docs/img/support-matrix.json`` records the sha256 of the report, of the page rendered from it,
of this script and of the PNG. ``--check`` (and ``tests/unit/rules/test_doc_images.py``) renders the page
again, without a browser, and fails when any of them differs: a new report, a change of the page's
code, of this script, or a PNG not made by it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "docs" / "img" / "support-matrix-report"
PNG = ROOT / "docs" / "img" / "support-matrix.png"
RECORD = ROOT / "docs" / "img" / "support-matrix.json"
WINDOW = (1400, 900)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def report_files(report: Path = REPORT) -> list[Path]:
    files = sorted(report.glob("*/results.json")) or sorted(report.glob("results.json"))
    if not files:
        raise SystemExit(f"support-matrix-image: no results.json under {report} — record a report: --report DIR")
    return files


def page(report: Path = REPORT) -> tuple[str, str]:
    """The page for the recorded report, and the row whose details the screenshot opens."""
    sys.path.insert(0, str(ROOT))
    from envman.ci.report import load_results, render_html

    files = report_files(report)
    loaded = load_results(files)
    if not loaded.results:
        raise SystemExit(f"support-matrix-image: {report}: the report has no rows")
    generated = max(r.get("finished") or r.get("started") or "" for r in loaded.results) or None
    # named as in the repository wherever the report is read from (the tests read a copy)
    sources = [(REPORT / f.relative_to(report)).relative_to(ROOT).as_posix() for f in files]
    html = render_html(loaded.results, sources=sources, notes=loaded.notes, generated=generated)
    order = ("pass", "cpu-only", "fail", "not-buildable", "not-tested")
    shown = min(loaded.results, key=lambda r: (order.index(r["result"]) if r["result"] in order else len(order), r["row"]))
    return html, shown["row"]


def expected(report: Path = REPORT) -> dict[str, Any]:
    """What the record must say for the report as it is now (the PNG's hash aside)."""
    html, row = page(report)
    data = b"".join(f.relative_to(report).as_posix().encode() + b"\0" + f.read_bytes() for f in report_files(report))
    return {"report_sha256": sha256(data), "page_sha256": sha256(html.encode()),
            "script_sha256": sha256(Path(__file__).read_bytes()), "row": row, "window": list(WINDOW)}


def stale(report: Path = REPORT, png: Path = PNG, record: Path = RECORD) -> list[str]:
    """Why the image is stale (nothing when it is current)."""
    try:
        have = json.loads(record.read_text())
    except (OSError, ValueError) as exc:
        return [f"{record.name}: cannot be read ({exc})"]
    want = expected(report)
    why = [f"{key} is {have.get(key)!r}, now {value!r}" for key, value in want.items() if have.get(key) != value]
    if not png.is_file() or sha256(png.read_bytes()) != have.get("png_sha256"):
        why.append(f"{png.name} is not the image the record names (png_sha256)")
    return why


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise SystemExit("support-matrix-image: headless chromium not found — apt-get install -y chromium")
    return found


def screenshot(html: str, row: str, out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "support-matrix.html"
        src.write_text(html)
        shot = Path(tmp) / "shot.png"
        cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
               f"--user-data-dir={tmp}/profile", f"--screenshot={shot}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
               "--hide-scrollbars", src.as_uri() + "#" + row]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env={**os.environ, "HOME": tmp})
        if p.returncode != 0 or not shot.is_file():
            raise SystemExit(f"support-matrix-image: chromium exit {p.returncode}: {p.stderr[-2000:]}")
        shutil.copyfile(shot, out)


def record_report(dirs: list[Path], report: Path = REPORT) -> None:
    """Copy the results.json of each ``envman ci run`` report directory (shard) under ``report``."""
    if report.exists():
        shutil.rmtree(report)
    for i, d in enumerate(dirs, 1):
        src = d / "results.json" if d.is_dir() else d
        json.loads(src.read_text())  # a report, not any file
        (report / f"shard-{i}").mkdir(parents=True)
        shutil.copyfile(src, report / f"shard-{i}" / "results.json")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--report", type=Path, nargs="+", help="envman ci run report directories to record first")
    ap.add_argument("--check", action="store_true", help="exit 1 when the image is older than what makes it")
    args = ap.parse_args(argv)
    if args.check:
        why = stale()
        for line in why:
            print(f"support-matrix-image: stale: {line}", file=sys.stderr)
        if why:
            print("support-matrix-image: run python scripts/support-matrix-image.py", file=sys.stderr)
        return 1 if why else 0
    if args.report:
        record_report(args.report)
    html, row = page()
    screenshot(html, row, PNG)
    record = {**expected(), "png_sha256": sha256(PNG.read_bytes()),
              "report": [f.relative_to(ROOT).as_posix() for f in report_files()]}
    RECORD.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(f"wrote {PNG.relative_to(ROOT)} and {RECORD.relative_to(ROOT)} ({row} open)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
