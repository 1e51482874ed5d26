"""What the engine streams back: the classic builder's JSON chunks read as :class:`BuildEvent`
objects (with the log tail a failed build shows), and one line per layer of a push or a pull."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from envman.engine.api import BuildEvent
from envman.errors import BuildError, clip, printable, without_ansi

LOG_TAIL_LINES = 40

_STEP_RE = re.compile(r"^Step (\d+/\d+) : ")
_BUILT_RE = re.compile(r"^Successfully built ([0-9a-f]{12,64})\s*$")


class BuildStreamParser:
    """Turns the classic builder's decoded JSON chunks into :class:`BuildEvent` objects.

    Chunks look like ``{"stream": "Step 1/3 : FROM x\\n"}``, ``{"aux": {"ID": "sha256:..."}}``,
    ``{"status": "Pulling ...", "id": "..."}`` or ``{"error": "...", "errorDetail": {...}}``.
    ``stream`` text can split a line across chunks; partial lines are held until their newline.
    """

    def __init__(self, *, tag: str | None = None) -> None:
        self.tag = tag
        self.image_id: str | None = None
        self._tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        self._partial = ""

    @property
    def log_tail(self) -> str:
        return "\n".join(self._tail)

    def feed(self, chunk: Mapping[str, Any]) -> list[BuildEvent]:
        """Events for one chunk; raises :class:`BuildError` on an error chunk."""
        events: list[BuildEvent] = []
        if "error" in chunk or "errorDetail" in chunk:
            events.extend(self._flush())
            detail = chunk.get("errorDetail") or {}
            message = without_ansi(str(detail.get("message") or chunk.get("error") or "unknown build error"))
            self._tail.append(message.rstrip("\n"))
            raise self._error(message)
        aux = chunk.get("aux")
        if isinstance(aux, Mapping) and isinstance(aux.get("ID"), str):
            self.image_id = aux["ID"]
        text = chunk.get("stream")
        if isinstance(text, str):
            self._partial += text
            *lines, self._partial = self._partial.split("\n")
            events.extend(self._line(line) for line in lines)
        status = chunk.get("status")
        if isinstance(status, str):  # pull progress from a FROM that is not local
            line = f"{chunk['id']}: {status}" if chunk.get("id") else status
            events.append(self._line(line))
        return [e for e in events if e.text]

    def finish(self) -> list[BuildEvent]:
        """The closing events: a ``done`` event, or :class:`BuildError` when no image was made."""
        events = self._flush()
        if not self.image_id:
            raise self._error("the build stream ended without an image id")
        events.append(BuildEvent("done", f"built {self.image_id}", image_id=self.image_id))
        return events

    def _line(self, raw: str) -> BuildEvent:
        line = without_ansi(raw).rstrip("\r")
        if not line.strip():
            return BuildEvent("log", "")
        self._tail.append(line)
        built = _BUILT_RE.match(line)
        if built and not self.image_id:
            self.image_id = built.group(1)
        step = _STEP_RE.match(line)
        if step:
            return BuildEvent("step", line, step=step.group(1))
        return BuildEvent("log", line)

    def _flush(self) -> list[BuildEvent]:
        if not self._partial:
            return []
        line, self._partial = self._partial, ""
        event = self._line(line)
        return [event] if event.text else []

    def _error(self, message: str) -> BuildError:
        first = message.strip().splitlines()[0] if message.strip() else "unknown build error"
        where = f"build {self.tag}" if self.tag else None
        return BuildError(first, log_tail=self.log_tail, where=where,
                          fix="see the log tail above; rerun with --no-cache if a cached layer is stale")


def parse_build_stream(chunks: Iterable[Mapping[str, Any]], *, tag: str | None = None) -> Iterator[BuildEvent]:
    """Events for a whole decoded build stream; see :class:`BuildStreamParser`.

    On an error chunk an ``error`` event is yielded, then :class:`BuildError` is raised.
    """
    parser = BuildStreamParser(tag=tag)
    try:
        for chunk in chunks:
            yield from parser.feed(chunk)
        yield from parser.finish()
    except BuildError as err:
        yield BuildEvent("error", err.what)
        raise


def layer_progress(item: Any, seen: dict[str, tuple[str, int]]) -> str | None:
    """One line for a push or pull stream item, or None: a layer's new state (``Preparing``,
    ``Pushed``, ``Layer already exists``...), and for an upload with a known size each quarter
    done (``1a2b3c4d5e6f: Pushing 50% of 812 MB``). ``seen`` keeps each layer's last state. The
    stream's words come from the engine and the registry, so the line shows them escaped and
    clipped, never obeyed by a terminal."""
    if not isinstance(item, Mapping):
        return None
    layer, status = item.get("id"), item.get("status")
    if not isinstance(layer, str) or not isinstance(status, str) or not layer or len(layer) > 80:
        return None
    raw_detail = item.get("progressDetail")
    detail: Mapping[str, Any] = raw_detail if isinstance(raw_detail, Mapping) else {}
    current, total = detail.get("current"), detail.get("total")
    quarter = 0
    if isinstance(current, int) and isinstance(total, int) and total > 0:
        quarter = min(3, 4 * current // total)
    state = (status, quarter)
    if seen.get(layer) == state or (seen.get(layer, ("", 0))[0] == status and quarter == 0):
        return None
    seen[layer] = state
    shown = f"{printable(layer)}: {clip(printable(status), 120)}"
    if quarter and isinstance(total, int):
        return f"{shown} {25 * quarter}% of {total / 1e6:.0f} MB"
    return shown
