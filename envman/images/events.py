"""The one reader of a build's event stream (``BuildEvent``: the builder's steps, output lines
and the image it made): every build envman runs (a stack, a rebuilt base, a verdict image, a
project image, the notebook layer) reads its events through :class:`BuildStream`, and whoever
shows them (the live progress of ``envman build``, the step lines of ``envman run``) subscribes
with ``on_event``."""

from __future__ import annotations

from typing import IO, TYPE_CHECKING, Callable, Iterable

if TYPE_CHECKING:
    from envman.engine.api import BuildEvent


class BuildStream:
    """A build's events read to the end: each one written to ``log`` (one line), handed to
    ``on_event``, and the image the build reported kept (``image_id``, ``None`` when it named
    none). ``step`` is the last step the build started: when the build raises, the step that
    failed."""

    def __init__(self, *, log: IO[str] | None = None, on_event: Callable[[BuildEvent], None] | None = None) -> None:
        self.log = log
        self.on_event = on_event
        self.image_id: str | None = None
        self.step: str | None = None

    def read(self, events: Iterable[BuildEvent]) -> BuildStream:
        for ev in events:
            if self.log is not None:
                self.log.write(ev.text.rstrip("\n") + "\n")
            if ev.kind == "step":
                self.step = ev.text
            if self.on_event is not None:
                self.on_event(ev)
            if ev.kind == "done":
                self.image_id = ev.image_id
        return self


__all__ = ["BuildStream"]
