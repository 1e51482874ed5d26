"""Tests of ``envman/engine/handoff.py``, moved unchanged from the former ``test_runner.py``
(which tested several modules)."""

from __future__ import annotations

import os

from envman.engine.handoff import terminal_flags

from tests.unit.run.test_plan import dirs  # noqa: F401 (shared with that file)


class _Tty:
    def __init__(self, tty, fd=None):
        self.tty, self.fd = tty, fd

    def isatty(self):
        return self.tty

    def fileno(self):
        if self.fd is None:
            raise ValueError("no fd")
        return self.fd


def test_terminal_flags():
    assert terminal_flags(_Tty(True), _Tty(True)) == (True, True)
    assert terminal_flags(_Tty(True), _Tty(False)) == (False, True)  # `envman run p -- cmd | less`
    r, w = os.pipe()
    try:
        assert terminal_flags(_Tty(False, r), _Tty(True)) == (False, True)  # `echo x | envman run ...`
    finally:
        os.close(r)
        os.close(w)
    with open(os.devnull) as null:
        assert terminal_flags(null, _Tty(True)) == (False, False)
