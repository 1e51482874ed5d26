"""``envman build`` progress: a live table on a terminal, plain lines in logs, nothing with --json."""

import io
import threading

from rich.console import Console

from envman.cli.progress import BuildProgress
from envman.engine.api import BuildEvent


def step(n, text):
    return BuildEvent("step", f"Step {n} : {text}", step=n)


def test_live_view_shows_each_stack_phase_step_and_instruction():
    out = io.StringIO()
    con = Console(file=out, force_terminal=True, width=120, color_system=None)
    p = BuildProgress(["torch-2.4-cuda12", "tf-2.15-cuda12"], con, live=True)
    p.phase("torch-2.4-cuda12", "build")
    p.event("torch-2.4-cuda12", step("5/21", "RUN pip install torch==2.4.1"))
    p.event("torch-2.4-cuda12", BuildEvent("log", "Collecting torch==2.4.1"))
    p.phase("tf-2.15-cuda12", "cached")
    con.print(p)
    text = out.getvalue()
    lines = {ln.split()[1]: ln for ln in text.splitlines() if ln.strip()}
    assert "building" in lines["torch-2.4-cuda12"] and "5/21" in lines["torch-2.4-cuda12"]
    assert "RUN pip install torch==2.4.1" in lines["torch-2.4-cuda12"]
    assert "Step 5/21 :" not in text
    # inside a long step the row shows the step's latest output line, so it never looks frozen
    assert "Collecting torch==2.4.1" in lines["torch-2.4-cuda12"]
    assert "cached" in lines["tf-2.15-cuda12"]
    p.phase("tf-2.15-cuda12", "smoke")
    p.phase("tf-2.15-cuda12", "done")
    p.phase("torch-2.4-cuda12", "failed")
    out.seek(0)
    out.truncate()
    con.print(p)
    lines = {ln.split()[1]: ln for ln in out.getvalue().splitlines() if ln.strip()}
    assert lines["tf-2.15-cuda12"].startswith("✓") and "done" in lines["tf-2.15-cuda12"]
    # a failed build keeps the step it failed on
    assert lines["torch-2.4-cuda12"].startswith("✗") and "failed" in lines["torch-2.4-cuda12"]
    assert "5/21" in lines["torch-2.4-cuda12"] and "RUN pip install" in lines["torch-2.4-cuda12"]


def test_live_context_draws_and_leaves_the_final_table():
    out = io.StringIO()
    con = Console(file=out, force_terminal=True, width=100, color_system=None)
    with BuildProgress(["a-1"], con, live=True) as p:
        p.phase("a-1", "build")
        p.event("a-1", step("1/3", "FROM nvidia/cuda:12.4.1-base-ubuntu22.04"))
        p.phase("a-1", "done")
    assert "✓" in out.getvalue() and "a-1" in out.getvalue()


def test_plain_lines_off_a_terminal_and_silence_with_json():
    out = io.StringIO()
    con = Console(file=out, force_terminal=False, width=200)
    p = BuildProgress(["a-1"], con, live=False)
    p.phase("a-1", "build")
    p.event("a-1", step("2/3", "RUN apt-get install -y python3.11"))
    p.event("a-1", BuildEvent("log", "Reading package lists..."))
    p.phase("a-1", "smoke")
    assert out.getvalue().splitlines() == ["a-1 step 2/3: RUN apt-get install -y python3.11", "a-1 smoke test"]
    quiet = io.StringIO()
    q = BuildProgress(["a-1"], Console(file=quiet, force_terminal=True), live=True, quiet=True)
    with q:
        q.phase("a-1", "build")
        q.event("a-1", step("2/3", "RUN x"))
    assert quiet.getvalue() == ""


def test_events_from_many_threads_while_drawing():
    con = Console(file=io.StringIO(), force_terminal=True, width=100, color_system=None)
    names = [f"s-{i}" for i in range(8)]
    p = BuildProgress(names, con, live=True)

    def feed(name):
        p.phase(name, "build")
        for k in range(200):
            p.event(name, step(f"{k}/200", f"RUN step {k}"))
        p.phase(name, "done")

    threads = [threading.Thread(target=feed, args=(n,)) for n in names]
    with p:
        for t in threads:
            t.start()
        for _ in range(50):
            con.print(p)
        for t in threads:
            t.join()
    con.print(p)
    assert all(r.phase == "done" and r.lines == 200 for r in p._rows.values())


def test_the_current_steps_latest_output_and_byte_counts_show_and_other_steps_do_not():
    out = io.StringIO()
    con = Console(file=out, force_terminal=True, width=160, color_system=None)
    p = BuildProgress(["a-1"], con, live=True)
    p.phase("a-1", "build")
    p.event("a-1", step("3/9", "RUN pip install torch==2.13.0"))
    p.event("a-1", BuildEvent("progress", "transferring context: 812.3MB 4.1s", step="3/9"))
    con.print(p)
    assert "transferring context: 812.3MB" in out.getvalue()
    p.event("a-1", BuildEvent("log", "[bold]not markup[/bold]", step="2/9"))  # an older step's late line
    p.event("a-1", BuildEvent("log", "Downloading torch [x] (200 MB)", step="3/9"))
    out.seek(0)
    out.truncate()
    con.print(p)
    assert "Downloading torch [x] (200 MB)" in out.getvalue() and "not markup" not in out.getvalue()


def test_the_spinner_of_a_running_row_advances_between_redraws():
    con = Console(file=io.StringIO(), force_terminal=True, width=100, color_system=None)
    p = BuildProgress(["a-1"], con, live=True)
    p.phase("a-1", "build")
    frames = set()
    for _ in range(4):
        buf = io.StringIO()
        Console(file=buf, force_terminal=True, width=100, color_system=None).print(p)
        frames.add(buf.getvalue().split()[0])
        import time

        time.sleep(0.09)
    assert len(frames) >= 2, frames


def test_a_long_step_without_output_shows_its_own_elapsed_time(monkeypatch):
    import envman.cli.progress as progress

    clock = [1000.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    out = io.StringIO()
    con = Console(file=out, force_terminal=True, width=120, color_system=None)
    p = BuildProgress(["a-1"], con, live=True)
    p.phase("a-1", "build")
    p.event("a-1", step("2/9", "RUN apt-get install -y python3"))
    clock[0] += 75
    con.print(p)
    line = next(ln for ln in out.getvalue().splitlines() if "a-1" in ln)
    assert "RUN apt-get install" in line and "75s" in line.split("python3", 1)[1], line


def test_user_data_in_plain_lines_is_not_markup():
    out = io.StringIO()
    con = Console(file=out, force_terminal=False, width=200, color_system=None)
    p = BuildProgress(["tf[bold]-x"], con, live=False)
    p.phase("tf[bold]-x", "build")
    p.event("tf[bold]-x", step("1/2", "RUN pip install tensorflow[and-cuda]==2.15.0.post1"))
    text = out.getvalue()
    assert "tf[bold]-x" in text and "tensorflow[and-cuda]==2.15.0.post1" in text, text
