"""The cached paths print what the full path would, escaped as the full path escapes it: a no-op
build's recorded lines carry a smoke verdict's reason, which comes from an image's labels (anyone
who can push writes them), so a control character in it is shown, never obeyed."""

from __future__ import annotations

import pytest

from envman.errors import printable
from envman.run import fastpath as runcache

from .test_fastpath import engine  # noqa: F401 - the fake engine fixture

#: Reasons a pulled image's verdict label may carry: ESC sequences, CR, C1 CSI, bidi overrides.
REASONS = ["\x1b[2K\rall good", "\x9b2Jx", "ok\u202eevil", "a\nforged line", "\x1b]8;;http://x\x07link\x1b]8;;\x07"]


@pytest.mark.parametrize("reason", REASONS, ids=range(len(REASONS)))
def test_a_cached_no_op_build_prints_its_lines_escaped(reason, tmp_path, monkeypatch, engine, capsys):  # noqa: F811
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("ENVMAN_RUN_CACHE", raising=False)
    monkeypatch.delenv("ENVMAN_CACHE_DIR", raising=False)
    engine.images.update({"envman/s:latest": "sha256:cand"})
    line = ["cpu-only", "yellow", f"s (cached) envman/s:0123 — promoted to envman/s:latest: {reason}"]
    runcache.record(runcache.build_key([], ["s"]), deps=[], images=[("envman/s:latest", "sha256:cand")],
                    rows=[{"name": "s"}], lines=[line], json=False)
    with pytest.raises(SystemExit) as e:
        runcache.try_cached_build([], ["s"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out == f"cpu-only {printable(line[2])}\n"
    assert not any(c in out[:-1] for c in "\x1b\r\n\x9b\u202e\x07")
