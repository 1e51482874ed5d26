"""The support-matrix page in a real headless Chromium: it loads without a script error, its
cells say what the results say, a deep link opens a row's details, and it renders readably.

Needs Debian's ``chromium`` (``apt-get install -y chromium``; ``.ci/run`` installs it). The test
installs nothing: without Chromium it skips here and FAILS in CI (``CI`` set to a true value).
"""

import os
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from envman.ci.report import load_results, render_html

pytestmark = [pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "tests" / "data" / "report"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if found is None:
        msg = "headless chromium not found (apt-get install -y chromium)"
        if in_ci():
            pytest.fail(f"CI needs it: {msg}", pytrace=False)
        pytest.skip(msg)
    return found


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    loaded = load_results(sorted(p for p in RECORDED.iterdir() if p.is_dir()))
    out = tmp_path_factory.mktemp("report") / "support-matrix.html"
    out.write_text(render_html(loaded.results, sources=[str(p.relative_to(ROOT)) for p in map(Path, loaded.sources)],
                               generated="2024-05-01T12:00:00+00:00"))
    return out, loaded.results


def run_chromium(chromium, tmp_path, *args, url):
    cmd = [
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0", *args, url,
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})
    assert p.returncode == 0, f"chromium exit {p.returncode}:\n{p.stderr[-3000:]}"
    # console errors and uncaught exceptions are logged as CONSOLE lines with --enable-logging
    console = [line for line in p.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not [line for line in console if "Uncaught" in line or "rror" in line], "\n".join(console)
    return p


class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.status = None
        self.cells, self.entries = [], []
        self.details_row = None
        self.in_details = 0
        self.details_text = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id") == "status":
            self.status = a
        if tag == "td" and "cell" in (a.get("class") or ""):
            self.cells.append(a)
        if tag == "button" and "entry" in (a.get("class") or ""):
            self.entries.append(a)
        if tag == "aside" and a.get("id") == "details":
            self.details_row = a.get("data-row")
            self.in_details = 1
        elif self.in_details and tag not in ("br", "img", "input", "meta"):
            self.in_details += 1

    def handle_endtag(self, tag):
        if self.in_details:
            self.in_details -= 1

    def handle_data(self, data):
        if self.in_details:
            self.details_text.append(data)


def test_page_loads_without_errors_and_cells_match_results(chromium, page, tmp_path):
    path, results = page
    failing = next(r for r in results if r["result"] == "fail")
    p = run_chromium(chromium, tmp_path, "--dump-dom", url=path.as_uri() + "#" + failing["row"])
    dom = Dom()
    dom.feed(p.stdout)
    assert dom.status is not None, "no #status element: the page did not render"
    assert dom.status["data-ready"] == "true", "the page's script did not finish"
    assert dom.status["data-errors"] == "0"
    # every result is in the grid, with its result; nothing else claims to be a result
    assert {e["data-row"]: e["data-result"] for e in dom.entries} == {r["row"]: r["result"] for r in results}
    assert {c["data-result"] for c in dom.cells} <= {"pass", "cpu-only", "fail", "not-buildable", "not-tested", "not-in-matrix"}
    pressed = [e["data-row"] for e in dom.entries if e.get("aria-pressed") == "true"]
    assert pressed == [failing["row"]]
    # the deep link opened the failing row's details: stack, steps and probe figures
    assert dom.details_row == failing["row"]
    details = " ".join(dom.details_text)
    assert failing["name"] in details and "Steps" in details and "Probe" in details
    assert failing["stack"]["base_image"] in details
    failed_checks = [c["name"] for c in (failing.get("probe") or {}).get("checks", []) if c["status"] == "fail"]
    assert all(name in details for name in failed_checks)


def test_cell_state_is_the_worst_of_its_entries(chromium, page, tmp_path):
    path, results = page
    p = run_chromium(chromium, tmp_path, "--dump-dom", url=path.as_uri())
    dom = Dom()
    dom.feed(p.stdout)
    by_row = {r["row"]: r for r in results}
    for r in results:
        cuda = r.get("cuda") or "cpu"
        (cell,) = [c for c in dom.cells if (c["data-framework"], c["data-version"], c["data-cuda"])
                   == (r["framework"], r["framework_version"], cuda)]
        same = [x["result"] for x in by_row.values()
                if (x["framework"], x["framework_version"], x.get("cuda") or "cpu") == (r["framework"], r["framework_version"], cuda)]
        order = ("fail", "not-buildable", "not-tested", "cpu-only", "pass")
        assert cell["data-result"] == min(same, key=order.index)
    assert dom.details_row is None  # no hash: no details opened


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_screenshot(chromium, page, tmp_path):
    path, results = page
    shot = tmp_path / "support-matrix.png"
    row = next(r for r in results if r["result"] == "cpu-only")["row"]
    run_chromium(chromium, tmp_path, f"--screenshot={shot}", "--window-size=1400,900", "--hide-scrollbars",
                 url=path.as_uri() + "#" + row)
    data = shot.read_bytes()
    assert _png_size(data) == (1400, 900)
    assert len(data) > 20_000  # a rendered page, not a blank one
    keep = os.environ.get("ENVMAN_KEEP_SCREENSHOT")
    if keep:  # a copy to look at (docs/img/support-matrix.png is made by scripts/support-matrix-image.py)
        Path(keep).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, keep)


def test_full_matrix_grids_stay_clear_of_the_details_panel(chromium, tmp_path):
    """With --full-matrix the grids are wide: none may run under the details panel beside it
    (which hid its CUDA columns); a wide grid scrolls inside its own column instead."""
    from envman.matrix.load import load_matrix

    loaded = load_results(sorted(p for p in RECORDED.iterdir() if p.is_dir()))
    html = render_html(loaded.results, matrix=load_matrix(), full_matrix=True, generated="2024-05-01T12:00:00+00:00")
    probe = ("<script>window.addEventListener('load', function () {"
             "var aside = document.getElementById('details').getBoundingClientRect();"
             "var bad = [], wide = 0;"
             "document.querySelectorAll('table.grid').forEach(function (t) {"
             "  var right = t.getBoundingClientRect().right, box = t.parentElement;"
             "  if (getComputedStyle(box).overflowX !== 'visible') { right = Math.min(right, box.getBoundingClientRect().right); }"
             "  if (right > aside.left + 0.5) { bad.push(t.dataset.framework); }"
             "  if (box.scrollWidth > box.clientWidth + 0.5) { wide += 1; } });"
             "document.body.setAttribute('data-overlap', bad.join(',') || 'none');"
             "document.body.setAttribute('data-scrolling', String(wide)); });</script></body>")
    out = tmp_path / "full.html"
    out.write_text(html.replace("</body>", probe))
    p = run_chromium(chromium, tmp_path, "--dump-dom", "--window-size=1280,900", url=out.as_uri())
    assert 'data-overlap="none"' in p.stdout
    assert 'data-scrolling="0"' not in p.stdout  # the full matrix is wider than the column: it scrolls
