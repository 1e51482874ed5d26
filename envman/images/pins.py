"""Runs pin images by id: another user moving a stable tag does not move this user's projects.

A project's first run records the id of the stack image it ran on (its *pin*, in this user's
state directory). Later runs keep that image while it is present and its smoke verdict still
allows a run, and say in one line when a newer stable image exists. A run moves to the current
stable image when:

* the project has no pin yet, or its pin is for another stack;
* the pinned image is gone or its verdict no longer allows a run;
* the stable image has the very layers of the pinned one (only its labels changed);
* the invoking user promoted the stable image after the pin was taken (your own ``envman build``
  moves your projects): told by this user's own state (the image's ID in ``built.json``, recorded
  by this user's build or promotion), never by the image's labels, which whoever builds an image
  writes (a neighbour can label an image with your uid and any time);
* ``envman run --update`` asks for it.

Standard library only: this is on the run path.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envman.digest import sha256
from envman.labels import SmokeVerdict
from envman.paths import state_dir

if TYPE_CHECKING:
    from typing import Mapping

    from envman.engine.api import ImageInfo

RUNNABLE = ("pass", "cpu-only")


@dataclass(frozen=True)
class Pin:
    stack: str
    image_id: str
    at: int  # Unix seconds


@dataclass(frozen=True)
class Choice:
    """The stack image a run uses and what to tell the user about it."""

    info: ImageInfo | None  # the inspected image (None: neither stable nor pinned exists)
    pinned: bool  # True when it is the pin and not the current stable image
    note: str | None = None  # one line for stderr, or None
    repin: bool = False  # whether to record this image as the new pin


def pins_file() -> Path:
    return state_dir() / "pins.json"


def project_key(name: str, root: str) -> str:
    """A project's pin key: its name and its root (two projects may share a name)."""
    return sha256(f"{name}\0{root}".encode("utf-8", "surrogateescape")).hexdigest()[:32]


def read_pins() -> dict[str, Any]:
    """Every pin of this user, as stored (read once where many projects are looked at)."""
    from envman.state import read_json_object

    return read_json_object(pins_file())


def load_pin(key: str, pins: Mapping[str, Any] | None = None) -> Pin | None:
    """The pin of ``key``, from ``pins`` (:func:`read_pins`) when given, else from the file."""
    raw: Any = (read_pins() if pins is None else pins).get(key)
    try:
        return Pin(str(raw["stack"]), str(raw["image_id"]), int(raw["at"]))
    except (TypeError, KeyError, ValueError, OverflowError):  # OverflowError: an "at" of Infinity
        return None


def save_pin(key: str, stack: str, image_id: str, now: float | None = None) -> Pin:
    from envman.state import atomic_write

    pin = Pin(stack, image_id, int(time.time() if now is None else now))
    data = read_pins()
    data[key] = asdict(pin)
    atomic_write(pins_file(), json.dumps(data, indent=1, sort_keys=True))
    return pin


def pinned_ids() -> frozenset[str]:
    """Every image id this user's projects are pinned to (``prune`` keeps them)."""
    return frozenset(str(v.get("image_id")) for v in read_pins().values() if isinstance(v, dict) and v.get("image_id"))


def vouched_at(info: ImageInfo) -> int | None:
    """When this user's own state says their build or promotion made the image ``info`` (its
    record in ``built.json``, Unix seconds), else ``None``. Labels play no part; nor does a cached
    smoke report (re-testing another user's image is not promoting it)."""
    from envman.images.provenance import built_record

    rec = built_record(info.id)
    at = rec.get("at") if rec is not None else None
    return at if isinstance(at, int) and not isinstance(at, bool) else None


def choose(stack: str, stable: ImageInfo | None, pinned: ImageInfo | None, pin: Pin | None, *,
           uid: int, verdict: Any, rootfs: Any, update: bool = False, vouched: Any = None) -> Choice:
    """Pure but for ``vouched``: which image a run of ``stack`` uses, given the inspected stable and
    pinned images.

    ``verdict(info)`` gives an image's :class:`SmokeVerdict` (or ``None``), ``rootfs(info)`` the
    digest of its layers, ``vouched(info)`` when the invoking user's own state vouches for it
    (default :func:`vouched_at`): the stable image is "mine" only by that, and only with a runnable
    verdict, whatever uid its labels name (``uid``, the invoking user, is what they would have to
    name; they are never enough).
    """
    if pin is None or pin.stack != stack or update or pinned is None:
        note = None
        if pin is not None and pin.stack == stack and pinned is None and not update and stable is not None:
            note = f"the image this project was pinned to ({pin.image_id[:19]}) is gone; using the current stable image"
        return Choice(stable, False, note, repin=stable is not None)
    pv: SmokeVerdict | None = verdict(pinned)
    if stable is None:
        return Choice(pinned, True)
    if stable.id == pinned.id:
        return Choice(stable, False)
    if pv is None or pv.status not in RUNNABLE:
        return Choice(stable, False, f"the pinned image {pin.image_id[:19]} is no longer smoke-tested; "
                      "using the current stable image", repin=True)
    same_layers = rootfs(stable) is not None and rootfs(stable) == rootfs(pinned)
    sv: SmokeVerdict | None = verdict(stable)
    own = (vouched_at if vouched is None else vouched)(stable)
    mine = sv is not None and sv.status in RUNNABLE and own is not None and own >= pin.at
    if same_layers or mine:
        return Choice(stable, False, repin=True)
    who = f", promoted by {sv.by_user}" if sv is not None and sv.by_user else ""
    return Choice(pinned, True, f"a newer stable image of {stack} exists ({stable.id[:19]}{who}); "
                  f"this project stays on {pinned.id[:19]}: envman run --update moves it")
