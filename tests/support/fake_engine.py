"""One in-memory engine for the tests: a :class:`envman.engine.api.ContainerEngine` without a daemon.

It keeps images (by id, with their tags), containers and a registry in dictionaries and behaves
like the real engines where envman relies on it (the contract tests in
``tests/support/engine_contract.py`` hold it to the same rules as the Docker SDK engine and the
Unix-socket client): refs resolve by tag or id, a build inherits the labels of its ``FROM`` image
when that image is known here, ``tag`` moves a tag, label filters take ``key`` or ``key=value``,
``run`` adds envman's managed labels and removes its container unless told not to.

What the tests choose: ``engine_info`` (an :class:`EngineInfo`), ``fail_build`` (a predicate on the
tag, or ``True``) and ``build_error`` (what a failed build raises), ``on_run`` (``(image, command, kwargs) -> RunResult``: what the "container"
prints) and ``build_delay`` (seconds, to widen race windows). What they read: ``builds`` (tags in
order), ``build_calls`` (their options), ``runs`` (``(image, command, kwargs)``), ``inspected`` (refs asked for), ``pushed``.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import tarfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from envman import labels as L
from envman.engine.api import BuildEvent, ContainerInfo, EngineInfo, ImageInfo, LabelFilter, RunResult
from envman.engine.context import deterministic_tar
from envman.engine.select import EngineKind
from envman.errors import BuildError, EngineError

RunHandler = Callable[[str, Sequence[str], Mapping[str, Any]], RunResult]


def _digest(*parts: object) -> str:
    return "sha256:" + hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()


def from_line(context_tar: bytes) -> str:
    """The image the context's Dockerfile starts ``FROM`` ("" when it has none or is no tar)."""
    try:
        with tarfile.open(fileobj=io.BytesIO(context_tar)) as tf:
            member = tf.extractfile("Dockerfile")
            text = member.read().decode() if member else ""
    except (tarfile.TarError, KeyError):
        return ""
    for line in text.splitlines():
        words = line.split()
        if words and words[0].upper() == "FROM" and len(words) > 1:
            return next((w for w in words[1:] if not w.startswith("--")), "")
    return ""


def adds_layers(context_tar: bytes) -> bool:
    """Whether the context's Dockerfile adds a file system layer (RUN, COPY or ADD): a
    ``FROM x`` plus ``LABEL`` lines (a verdict image) keeps its base's layers, as Docker does."""
    try:
        with tarfile.open(fileobj=io.BytesIO(context_tar)) as tf:
            member = tf.extractfile("Dockerfile")
            text = member.read().decode() if member else ""
    except (tarfile.TarError, KeyError):
        return True
    return any(line.split()[0].upper() in ("RUN", "COPY", "ADD") for line in text.splitlines() if line.split())


def matches(labels: Mapping[str, str], label_filter: LabelFilter) -> bool:
    """Whether ``labels`` pass every filter (``{"k": "v"}`` or ``["k", "k=v"]``), as the engine says."""
    wanted = [f"{k}={v}" for k, v in label_filter.items()] if isinstance(label_filter, Mapping) else list(label_filter)
    for f in wanted:
        key, eq, value = f.partition("=")
        if key not in labels or (eq and labels[key] != value):
            return False
    return True


class FakeEngine:
    """An in-memory :class:`envman.engine.api.ContainerEngine` (see the module docstring)."""

    url = "unix:///run/fake-engine.sock"

    def __init__(self, *, engine_info: EngineInfo | None = None, fail_build: bool | Callable[[str], bool] = False,
                 build_error: BuildError | None = None, on_run: RunHandler | None = None,
                 build_delay: float = 0.0) -> None:
        self.engine_info = engine_info or EngineInfo(server_version="fake", version="fake", runtimes=("runc",))
        self.fail_build = fail_build
        self.build_error = build_error or BuildError("boom", log_tail="line1\nboom")
        self.on_run = on_run or (lambda image, command, kw: RunResult(0, "", ""))
        self.build_delay = build_delay
        self._images: dict[str, ImageInfo] = {}  # by id, tags kept in self._tags
        self._tags: dict[str, str] = {}  # repo:tag -> id
        self._containers: dict[str, ContainerInfo] = {}
        self.registry: dict[str, str] = {}  # pushed ref -> image id
        self.builds: list[str] = []
        self.build_calls: list[dict[str, Any]] = []  # each build's options
        self.runs: list[tuple[str, Sequence[str], Mapping[str, Any]]] = []
        self.inspected: list[str] = []
        self.pushed: list[str] = []
        self.removed: list[str] = []  # refs remove_image was asked to remove
        self._serial = itertools.count(1)
        self.lock = threading.Lock()

    # -- test set-up ---------------------------------------------------------------------------

    @classmethod
    def with_images(cls, images: Mapping[str, str], **kw: Any) -> FakeEngine:
        """A fake holding ``{ref: image id}`` (unlabelled images)."""
        engine = cls(**kw)
        for ref, image_id in images.items():
            if image_id not in engine._images:
                engine.add_image(None, image_id)
            engine._tags[_full(ref)] = image_id
        return engine

    def add_image(self, ref: str | None = None, image_id: str | None = None, *, labels: Mapping[str, str] | None = None,
                  created: int = 0, size: int = 1) -> str:
        """Put an image on the engine (tagged ``ref`` when given); its id."""
        image_id = image_id or _digest("image", ref, next(self._serial))
        self._images[image_id] = ImageInfo(image_id, (), dict(labels or {}), size, created,
                                           layers=(_digest("layer", image_id),))
        if ref:
            self._tags[_full(ref)] = image_id
        return image_id

    def add_container(self, container: ContainerInfo) -> None:
        self._containers[container.id] = container

    def tag_names(self) -> set[str]:
        """Every ``repo:tag`` on the engine."""
        return set(self._tags)

    # -- the read side ---------------------------------------------------------------------------

    def info(self) -> EngineInfo:
        return self.engine_info

    def kind(self) -> EngineKind:
        i = self.engine_info
        return EngineKind(i.kind, i.version, i.rootless, i.api_version)

    @property
    def is_podman(self) -> bool:
        return self.engine_info.kind == "podman"

    def _resolve(self, ref: str) -> str | None:
        if ref in self._images:
            return ref
        if ref.startswith("sha256:"):
            return None
        hit = self._tags.get(_full(ref))
        if hit is None and "@sha256:" in ref:
            hit = self.registry.get(ref)
            hit = hit if hit in self._images and ref in self._images[hit].repo_digests else None
        return hit

    def _view(self, image_id: str) -> ImageInfo:
        img = self._images[image_id]
        tags = tuple(sorted(t for t, i in self._tags.items() if i == image_id))
        return ImageInfo(img.id, tags, dict(img.labels), img.size, img.created, img.repo_digests,
                         img.architecture, img.os, img.layers)

    def inspect_image(self, ref: str) -> ImageInfo | None:
        self.inspected.append(ref)
        found = self._resolve(ref)
        return self._view(found) if found else None

    def image_exists(self, ref: str) -> bool:
        return self._resolve(ref) is not None

    def list_images(self, label_filter: LabelFilter) -> list[ImageInfo]:
        return [self._view(i) for i, img in sorted(self._images.items()) if matches(img.labels, label_filter)]

    def list_containers(self, labels: LabelFilter, *, all: bool = True) -> list[ContainerInfo]:
        return [c for c in self._containers.values()
                if matches(c.labels, labels) and (all or c.state == "running")]

    def inspect_container(self, ref: str) -> ContainerInfo | None:
        return next((c for c in self._containers.values() if ref in (c.id, c.name)), None)

    # -- the write side --------------------------------------------------------------------------

    def build(self, context_tar: bytes, tag: str, *, labels: Mapping[str, str],
              buildargs: Mapping[str, str] | None = None, nocache: bool = False, pull: bool = False,
              dockerfile: str = "Dockerfile", platform: str | None = None,
              network: str | None = None, extra_hosts: Mapping[str, str] | None = None) -> Iterator[BuildEvent]:
        with self.lock:
            self.builds.append(tag)
            self.build_calls.append({"tag": tag, "labels": dict(labels), "buildargs": dict(buildargs or {}),
                                     "nocache": nocache, "pull": pull, "dockerfile": dockerfile, "platform": platform,
                                     "network": network, "extra_hosts": dict(extra_hosts or {})})
            serial = next(self._serial)
        if self.build_delay:
            time.sleep(self.build_delay)
        yield BuildEvent("step", "Step 1/2 : FROM base", step="1/2")
        failing = self.fail_build(tag) if callable(self.fail_build) else self.fail_build
        if failing:
            yield BuildEvent("error", self.build_error.what)
            raise self.build_error
        base = self._resolve(from_line(context_tar)) if from_line(context_tar) else None
        inherited = dict(self._images[base].labels) if base else {}
        image_id = _digest("build", tag, serial, context_tar)
        layers = self._images[base].layers if base else ()
        if adds_layers(context_tar) or not layers:
            layers = (*layers, _digest("layer", image_id))
        with self.lock:
            self._images[image_id] = ImageInfo(image_id, (), {**inherited, **L.namespaced(labels)}, len(context_tar),
                                               int(time.time()), layers=layers)
            self._tags[_full(tag)] = image_id
        yield BuildEvent("done", f"built {image_id}", image_id=image_id)

    def run(self, image: str, command: Sequence[str], **kw: Any) -> RunResult:
        found = self._resolve(image)
        if found is None:
            raise EngineError(f"create container from {image}: No such image: {image}")
        if kw.get("gpus") is not None and self.engine_info.gpu_mechanism() is None:
            raise EngineError(f"GPU requested (gpus={str(kw['gpus'])!r}) but the engine has no NVIDIA runtime or CDI device")
        self.runs.append((image, list(command), kw))
        cid = _digest("container", next(self._serial))[7:]
        labels = L.with_managed(kw.get("labels"))
        self._containers[cid] = ContainerInfo(cid, f"fake-{cid[:12]}", image, "exited", labels, found,
                                              int(time.time()), tuple((m.source, m.target) for m in kw.get("mounts") or ()))
        try:
            return self.on_run(image, command, {**kw, "labels": labels})
        finally:
            if kw.get("remove", True):
                self._containers.pop(cid, None)

    def tag(self, image: str, ref: str) -> None:
        found = self._resolve(image)
        if found is None:
            raise EngineError(f"tag {image} as {ref}: No such image: {image}")
        self._tags[_full(ref)] = found

    def remove_image(self, ref: str, force: bool = False) -> bool:
        self.removed.append(ref)
        found = self._resolve(ref)
        if found is None:
            return False
        if ref in self._images or ref.startswith("sha256:"):
            for t in [t for t, i in self._tags.items() if i == found]:
                del self._tags[t]
            del self._images[found]
            return True
        del self._tags[_full(ref)]
        if found not in self._tags.values():
            del self._images[found]
        return True

    def remove_container(self, container: str, force: bool = True) -> bool:
        c = self.inspect_container(container)
        return self._containers.pop(c.id, None) is not None if c else False

    def import_image(self, tar_path: str, ref: str, *, changes: Sequence[str] = ()) -> str:
        labels = dict(_label_change(c) for c in changes if c.upper().startswith("LABEL "))
        return self.add_image(ref, labels=labels)

    def push(self, ref: str, *, on_progress: Callable[[str], None] | None = None) -> str:
        found = self._resolve(ref)
        if found is None:
            raise EngineError(f"push {ref}: An image does not exist locally with the tag: {ref}")
        if on_progress is not None:  # what the engine's stream says of one layer, as the real client words it
            on_progress(f"{found[7:19]}: Preparing")
            on_progress(f"{found[7:19]}: Pushed")
        digest = _digest("manifest", found)
        repo = ref.rsplit(":", 1)[0] if ":" in ref.rsplit("/", 1)[-1] else ref
        self.registry[ref] = found
        self.registry[f"{repo}@{digest}"] = found
        img = self._images[found]
        self._images[found] = ImageInfo(img.id, (), img.labels, img.size, img.created,
                                        tuple(sorted({*img.repo_digests, f"{repo}@{digest}"})), layers=img.layers)
        self.pushed.append(ref)
        return digest

    def pull(self, ref: str) -> None:
        found = self.registry.get(ref)
        if found is None or found not in self._images:
            raise EngineError(f"pull {ref}: manifest unknown")
        if "@" not in ref:
            self._tags[_full(ref)] = found

    def registry_digest(self, ref: str) -> str:
        found = self.registry.get(ref)
        if found is None:
            raise EngineError(f"ask the registry about {ref}: manifest unknown")
        return _digest("manifest", found)

    def insecure_registries(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return ("127.0.0.0/8",), ()

    def storage(self) -> tuple[int, int]:
        """Each image's size once (the fake keeps no layers), and no build cache."""
        return sum(i.size for i in self._images.values()), 0


def _full(ref: str) -> str:
    """``repo`` → ``repo:latest``, as the engine reads a ref without a tag."""
    return ref if ":" in ref.rsplit("/", 1)[-1] or "@" in ref else f"{ref}:latest"


def _label_change(change: str) -> tuple[str, str]:
    key, _, value = change.split(None, 1)[1].partition("=")
    return key.strip(), value.strip().strip('"')


@dataclass
class FakeContext:
    """A rendered build context as the build pipeline reads one (``render_hash``, ``tar()``,
    ``secrets``, ``dockerfile``), without rendering anything."""

    render_hash: str
    dockerfile: str = ""
    secrets: dict[str, bytes] = field(default_factory=dict)

    @property
    def files(self) -> dict[str, bytes]:
        return {"Dockerfile": self.dockerfile.encode()}

    @property
    def modes(self) -> dict[str, int]:
        return {"Dockerfile": 0o644}

    def tar(self) -> bytes:
        return deterministic_tar({"Dockerfile": self.dockerfile.encode()})


def patch_connect(monkeypatch, engine: FakeEngine) -> None:
    """``Engine.connect()`` hands out ``engine`` (as a context manager, like the real one)."""
    from contextlib import nullcontext

    from envman.engine import docker as D

    monkeypatch.setattr(D.Engine, "connect", classmethod(lambda cls, *a, **k: nullcontext(engine)))
