"""Rendered layer Dockerfiles (project images, the notebook layer), kept per user.

``envman run`` works out a project image's tag from its Dockerfile on every run that is not served
by the run-plan cache (every GPU run), and laying a plan out through Jinja costs ~50 ms (importing
jinja2, compiling the template) against ~3 ms for the rest. So the text a plan rendered to is kept
in ``renders.json`` in the user's envman cache folder (:func:`envman.paths.cache_dir`), under a
key (:func:`render_key`) that is a sha256 over

* the whole plan: every field of every section, with each section's type, serialised canonically
  (:func:`canonical`);
* the bytes of every template file the render reads: the plan's template and the ones it
  imports, includes or extends (:func:`template_files`);
* the bytes of the modules that turn a plan into text (:data:`LAYOUT_MODULES`): the Jinja
  environment's settings (``template.py``), the layout that picks the steps (``layout.py``), the
  syntax each step is written in (``steps.py``), the image's places the layout reads
  (``imagepaths.py``), the plan's sections it lays out (``sections.py``) and the shell quoting it
  uses (``quote.py``);
* the bytes of the installed ``jinja2/__init__.py`` (its version), and envman's version.

A project image's text is also kept under a second key (:func:`inputs_key`) that a run can work
out without building the plan at all: a sha256 over the values the plan is built from (the
project's name, stack, base image id, apt packages, whether it has requirements and a lock), the
bytes of every module that builds the plan from them (:data:`PLAN_MODULES`: ``layerplan.py`` and
every envman module it imports) and all of the above but the plan. A hit then skips importing the
plan's sections and steps too (about 30 dataclasses), the largest cost of a run that has a project
image and misses the run-plan cache.

Only plans of ``project.Dockerfile.j2`` without network settings are kept: they hold names, ids,
package names and paths, never an index URL or a credential (a stack image's plan may carry
index settings; it is rendered on build, off the run path, and never cached). Anything in doubt
(an unreadable, corrupt, foreign-owned or group/world-writable file, a template that names
another one through an expression, a value the serialisation does not know) is a miss, and the
render runs as without a cache. Each entry keeps the text's sha256 beside it and is checked
against it. The file is written atomically, mode 0600, in a 0700 folder, and keeps the last
:data:`MAX_ENTRIES` renders. Inside :func:`batched` (``envman prune`` working out every registered
project's image) the file is read once and written once, however many renders the batch asks for,
and keeps every render the batch used (a cache sized to the registered projects, not to 64).

Standard library only: a hit must not import jinja2.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from contextlib import contextmanager

from envman.digest import sha256
from envman import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from envman.render.sections import DockerfilePlan

CACHE_FORMAT = 1
RENDER_CACHE = "renders.json"
MAX_ENTRIES = 64
#: Templates whose plans hold no secret (see the module docstring).
CACHED_TEMPLATES = frozenset({"project.Dockerfile.j2"})
#: The modules of this package whose code, beside the plan and the templates, decides a render's
#: text (tests/unit/render/test_rendercache.py checks that it names every one the layout imports).
LAYOUT_MODULES = ("template.py", "layout.py", "steps.py", "imagepaths.py", "sections.py", "quote.py", "mountpoints.py")
#: The modules, relative to the envman package, whose code builds a project's plan from its values
#: (:func:`envman.render.layerplan.project_plan` and every envman module it imports):
#: :func:`inputs_key` covers them beside :data:`LAYOUT_MODULES` (tests/unit/render/test_rendercache.py
#: checks that it names every module importing ``envman.render.layerplan`` loads).
PLAN_MODULES = ("__init__.py", "errors.py", "labels.py", "paths.py", "state.py", "stack/__init__.py", "stack/names.py",
                "probe/__init__.py", "probe/pyz.py", "probe/app/__init__.py", "probe/app/contract.py",
                "render/__init__.py", "render/layerplan.py")
#: A tag that loads another template; its argument must be a string literal for the file to be cached.
_LOADS = re.compile(r"\{%[-+]?\s*(?:import|include|extends|from)\b\s*(.)", re.S)
_LITERAL = re.compile(r"\{%[-+]?\s*(?:import|include|extends|from)\s*(\"([^\"\\]+)\"|'([^'\\]+)')", re.S)


def canonical(value: Any) -> Any:
    """``value`` (a plan) as JSON-ready data: a dataclass becomes its type name and every field;
    tuples and lists become lists. A value of any other type raises :class:`TypeError`."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
        out["@type"] = f"{type(value).__module__}.{type(value).__qualname__}"
        return out
    if isinstance(value, (tuple, list)):
        return [canonical(v) for v in value]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    raise TypeError(f"{type(value).__name__} in a Dockerfile plan")


def template_files(name: str, root: str) -> dict[str, bytes] | None:
    """``name`` and every template it loads, transitively, under ``root``: {name: bytes}; ``None``
    when one cannot be read or one is loaded through an expression."""
    found: dict[str, bytes] = {}
    todo = [name]
    while todo:
        current = todo.pop()
        if current in found:
            continue
        try:
            with open(os.path.join(root, current), "rb") as fh:
                data = fh.read()
        except OSError:
            return None
        found[current] = data
        text = data.decode("utf-8", "replace")
        literal = [m.group(2) or m.group(3) for m in _LITERAL.finditer(text)]
        if len(literal) != len(_LOADS.findall(text)):
            return None
        todo += literal
    return found


def _jinja_fingerprint() -> bytes | None:
    """The installed ``jinja2/__init__.py`` (it holds the version), found without importing jinja2."""
    from importlib.util import find_spec

    try:
        spec = find_spec("jinja2")
        if spec is None or not spec.origin:
            return None
        with open(spec.origin, "rb") as fh:
            return fh.read()
    except (OSError, ImportError, ValueError):
        return None


def _code(template: str, root: str, modules: tuple[str, ...]) -> list[bytes] | None:
    """What decides a render beside its plan: the bytes of ``modules`` (relative to the envman
    package) and of :data:`LAYOUT_MODULES`, of jinja2's version and of ``template`` with every
    template it loads; ``None`` when one cannot be read (not cached)."""
    templates = template_files(template, root)
    jinja = _jinja_fingerprint()
    if templates is None or jinja is None:
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    package = os.path.dirname(here)
    parts = []
    try:
        for folder, names in ((here, LAYOUT_MODULES), (package, modules)):
            for name in names:
                with open(os.path.join(folder, name), "rb") as fh:
                    parts.append(name.encode() + b"\0" + fh.read())
    except OSError:
        return None
    return [*parts, jinja, *(n.encode() + b"\0" + templates[n] for n in sorted(templates))]


def _key(kind: str, body: str, parts: list[bytes]) -> str:
    h = sha256(f"envman-{kind}:{CACHE_FORMAT}:{__version__}\0".encode())
    h.update(body.encode() + b"\0")
    for part in parts:
        h.update(sha256(part).digest())
    return h.hexdigest()


def render_key(plan: DockerfilePlan, root: str) -> str | None:
    """The cache key of ``plan`` rendered from the templates in ``root``; ``None``: not cached."""
    if plan.template not in CACHED_TEMPLATES or plan.network is not None:
        return None
    try:
        body = json.dumps(canonical(plan), sort_keys=True, ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError):
        return None
    parts = _code(plan.template, root, ())
    return _key("render", body, parts) if parts is not None else None


def inputs_key(builder: str, template: str, values: dict[str, Any], root: str) -> str | None:
    """The cache key of the text that ``builder`` (the name of a plan builder of
    :data:`PLAN_MODULES`, such as ``project_plan``) makes of ``values`` (names, ids, flags: plain
    JSON) through ``template`` in ``root``; ``None``: not cached. Only plans without network
    settings are keyed this way (the caller passes none)."""
    if template not in CACHED_TEMPLATES:
        return None
    try:
        body = json.dumps({"builder": builder, "values": values}, sort_keys=True, ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError):
        return None
    parts = _code(template, root, PLAN_MODULES)
    return _key("render-inputs", body, parts) if parts is not None else None


def cache_path() -> str:
    from envman.paths import cache_dir

    return os.path.join(cache_dir(), RENDER_CACHE)


def _load(path: str) -> dict[str, Any]:
    """The cache's entries; {} for a missing, unreadable, corrupt, foreign-owned or
    group/world-writable file."""
    from envman.safefile import read_state_json

    data = read_state_json(path, what="render cache")
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT or not isinstance(data.get("renders"), dict):
        return {}
    renders: dict[str, Any] = data["renders"]
    return renders


def _text_hash(text: str) -> str:
    return sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


#: The open batch (:func:`batched`): the entries read once, and whether the batch changed them.
_BATCH: list[dict[str, Any]] = []


def batched() -> Any:
    """A context in which the cache file is read at most once and written at most once (at the
    end): many renders cost one load and one write, not one of each per render. Nested, the
    outermost batch is the one."""
    @contextmanager
    def batch() -> Any:
        if _BATCH:
            yield
            return
        state: dict[str, Any] = {"renders": None, "dirty": False, "used": set()}
        _BATCH.append(state)
        try:
            yield
        finally:
            _BATCH.clear()
            if state["dirty"]:
                _write(state["renders"], keep=state["used"])

    return batch()


def _entries() -> dict[str, Any]:
    """The cache's entries: the batch's (loaded on first use) inside :func:`batched`, else the file's."""
    if not _BATCH:
        return _load(cache_path())
    if _BATCH[0]["renders"] is None:
        _BATCH[0]["renders"] = _load(cache_path())
    renders: dict[str, Any] = _BATCH[0]["renders"]
    return renders


def lookup(key: str) -> str | None:
    """The text rendered under ``key``, if it is there and intact."""
    if _BATCH:
        _BATCH[0]["used"].add(key)
    entry = _entries().get(key)
    if not isinstance(entry, dict):
        return None
    text, digest = entry.get("text"), entry.get("sha256")
    if not isinstance(text, str) or not isinstance(digest, str):
        return None
    try:
        return text if _text_hash(text) == digest else None
    except UnicodeError:
        return None


def store(key: str, text: str) -> None:
    """Keep ``text`` under ``key`` (the newest of the last :data:`MAX_ENTRIES`); a cache that cannot
    be written only costs time. Inside :func:`batched` it is written when the batch ends."""
    renders = _entries()
    renders.pop(key, None)
    renders[key] = {"text": text, "sha256": _text_hash(text)}
    if _BATCH:
        _BATCH[0]["dirty"] = True
        _BATCH[0]["used"].add(key)
    else:
        _write(renders)


def _write(renders: dict[str, Any], keep: set[str] | frozenset[str] = frozenset()) -> None:
    """Write the cache, keeping the newest :data:`MAX_ENTRIES` entries, and every entry in
    ``keep`` (what a batch used) however many: the cache is sized to what a batch needs (a prune
    with 1,000 projects of their own images), so the next identical batch hits every render."""
    from pathlib import Path

    from envman.errors import EnvmanError
    from envman.safefile import private_dir
    from envman.state import atomic_write

    path = Path(cache_path())
    limit = max(MAX_ENTRIES, len(keep))
    if len(renders) > limit:
        for key in [k for k in renders if k not in keep][:len(renders) - limit]:
            del renders[key]
    try:
        private_dir(path.parent)
        atomic_write(path, json.dumps({"format": CACHE_FORMAT, "renders": renders}))
    except (OSError, EnvmanError):
        pass


__all__ = ["CACHED_TEMPLATES", "LAYOUT_MODULES", "MAX_ENTRIES", "PLAN_MODULES", "RENDER_CACHE", "batched", "canonical",
           "inputs_key", "lookup", "render_key", "store", "template_files"]
