"""The images a stack or a rebuilt base starts FROM that envman did not build (``nvidia/cuda:*``,
``ubuntu:*``, a base of ``envman base make``) are used as they are only when something vouches for
them: this user's record, the user's own list of trusted IDs, or a pull from the repository their
name gives; else the build pulls them (envman.images.provenance; docs/security.md, "Sharing an
engine")."""

from __future__ import annotations

import io
import re
import tarfile

import pytest

from envman.errors import BuildError, EnvmanError
from envman.images import build as B
from envman.images import provenance as P
from envman.matrix.load import load_matrix
from envman.stack.resolve import resolve
from tests.support.fake_engine import FakeEngine, from_line

CUDA = "nvidia/cuda:12.4.1-base-ubuntu22.04"


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv(P.TRUSTED_IMAGES_ENV, raising=False)
    locks = tmp_path / "machine-locks"
    locks.mkdir()
    monkeypatch.setattr(P, "machine_lock_dir", lambda: locks)


@pytest.fixture(scope="module")
def cuda_stack():
    return resolve(load_matrix(), "torch-2.4-cuda12")


def _dockerfile(tar: bytes, name: str = "Dockerfile") -> str:
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        member = t.extractfile(name)
        return member.read().decode() if member else ""


class Registry(FakeEngine):
    """A fake engine whose builds pull their FROM images when asked to (``--pull``), as Docker's do:
    the registry's image for that name, whatever the local tag named."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.contexts: list[bytes] = []

    def build(self, context_tar, tag, **kw):
        self.contexts.append(context_tar)
        if kw.get("pull"):
            for ref in P.from_images(_dockerfile(context_tar)):
                self.pull(ref)
        return super().build(context_tar, tag, **kw)

    def publish(self, ref: str) -> str:
        """The genuine image of ``ref`` in its registry (pushed there by its publisher), pulled here."""
        genuine = self.add_image(ref, labels={"publisher": "upstream"})
        self.push(ref)
        return genuine

    def plant(self, ref: str) -> str:
        """Another engine user's ``docker tag evil <ref>``."""
        evil = self.add_image("neighbour/evil:1", labels={"publisher": "neighbour"})
        self.tag(evil, ref)
        return evil


def _built_on(engine: FakeEngine, image_id: str, base_id: str) -> bool:
    base = engine.inspect_image(base_id).layers
    return engine.inspect_image(image_id).layers[:len(base)] == base


@pytest.mark.parametrize("name", ["torch-2.4-cuda12", "torch-2.4-cpu"])
def test_a_stack_build_never_takes_a_planted_local_tag_of_its_upstream_base(tmp_path, monkeypatch, name):
    """Attack (issue 35 item 2, one step further down): ``envman/base:<tag>`` is reused only when
    this user built it, but a stack on a published base starts ``FROM nvidia/cuda:<tag>`` (or
    ``FROM ubuntu:24.04``) by tag, built without ``--pull``: the engine uses whatever image holds
    that tag locally. Another user of the rootful engine runs ``docker tag evil
    nvidia/cuda:12.4.1-base-ubuntu22.04``; the victim's next build of any stack on that base is
    built on the neighbour's image, recorded in ``built.json`` as the victim's own, smoke-tested and
    promoted. The upstream base must be named by digest, pulled, or checked against the registry."""
    e = FakeEngine()
    contexts: list[bytes] = []
    build = e.build

    def keeping(context_tar, tag, **kw):
        contexts.append(context_tar)
        return build(context_tar, tag, **kw)

    monkeypatch.setattr(e, "build", keeping)
    B.build_stack(e, resolve(load_matrix(), name))
    assert e.build_calls and len(contexts) == len(e.build_calls)
    for call, tar in zip(e.build_calls, contexts):
        dockerfile = _dockerfile(tar, call["dockerfile"])
        froms = re.findall(r"(?m)^FROM\s+(?:--\S+\s+)*(\S+)", dockerfile)
        upstream = [f for f in froms if not f.startswith(("sha256:", "envman/")) and f != "scratch"]
        assert upstream, dockerfile[:400]
        assert call["pull"] or all("@sha256:" in f for f in upstream), (call["tag"], upstream)


def test_a_planted_tag_of_the_upstream_base_is_pulled_over_and_never_built_on(cuda_stack):
    engine = Registry()
    genuine = engine.publish(CUDA)
    evil = engine.plant(CUDA)
    got = B.build_stack(engine, cuda_stack)
    assert engine.build_calls[-1]["pull"] is True
    assert _built_on(engine, got.image_id, genuine) and not _built_on(engine, got.image_id, evil)
    assert P.built_here(got.image_id, base=genuine)  # recorded on the image the build pulled


def test_an_upstream_base_pulled_from_its_repository_is_built_on_by_its_digest_and_keys_the_cache(cuda_stack):
    """No pull needed: the image under the name has a digest in that name's repository (a pull
    wrote it; a tag or a build never does). The build names that digest, the record its ID; a
    planted tag later is no cache hit and is pulled over."""
    engine = Registry()
    genuine = engine.publish(CUDA)
    got = B.build_stack(engine, cuda_stack)
    digest_ref = engine.inspect_image(genuine).repo_digests[0]
    assert from_line(engine.contexts[-1]) == digest_ref and engine.build_calls[-1]["pull"] is False
    assert P.built_here(got.image_id, base=genuine)
    again = B.build_stack(engine, cuda_stack)
    assert again.cached and again.image_id == got.image_id
    engine.plant(CUDA)
    third = B.build_stack(engine, cuda_stack)
    assert not third.cached and engine.build_calls[-1]["pull"] is True and _built_on(engine, third.image_id, genuine)


@pytest.mark.parametrize("digests", [
    ("localhost:5000/nvidia/cuda@sha256:" + "1" * 64,),  # the same path in another registry
    ("neighbour/cuda@sha256:" + "1" * 64,),
    ("nvidia/cuda2@sha256:" + "1" * 64,),
    ("nvidia/cuda@sha256:" + "1" * 63,),  # no digest
    ("nvidia/cuda@md5:" + "1" * 32,),
    (),
])
def test_a_digest_of_another_repository_or_none_vouches_for_nothing(digests):
    from envman.engine.api import ImageInfo

    info = ImageInfo("sha256:" + "a" * 64, (CUDA,), {}, repo_digests=digests)
    assert P.vouched_pin(info, CUDA) is None


@pytest.mark.parametrize("entry, ref", [
    ("nvidia/cuda@sha256:" + "1" * 64, CUDA),
    ("docker.io/nvidia/cuda@sha256:" + "1" * 64, CUDA),  # Podman's spelling
    ("docker.io/library/ubuntu@sha256:" + "1" * 64, "ubuntu:24.04"),
    ("ubuntu@sha256:" + "1" * 64, "docker.io/library/ubuntu:24.04"),
    ("mirror.example:5000/nvidia/cuda@sha256:" + "1" * 64, "mirror.example:5000/nvidia/cuda:12.4.1-base-ubuntu22.04"),
    ("nvidia/cuda@sha256:" + "1" * 64, f"{CUDA}@sha256:" + "1" * 64),  # the very digest the name pins
])
def test_a_digest_of_the_repository_the_name_gives_vouches_for_the_image(entry, ref):
    from envman.engine.api import ImageInfo

    info = ImageInfo("sha256:" + "a" * 64, (), {}, repo_digests=("other/x@sha256:" + "2" * 64, entry))
    assert P.vouched_pin(info, ref) == entry


def test_a_name_that_pins_a_digest_is_vouched_for_only_by_that_digest():
    from envman.engine.api import ImageInfo

    info = ImageInfo("sha256:" + "a" * 64, (), {}, repo_digests=("nvidia/cuda@sha256:" + "1" * 64,))
    assert P.vouched_pin(info, f"{CUDA}@sha256:" + "2" * 64) is None


def test_an_image_this_user_recorded_or_trusts_by_id_is_built_on_by_its_id(cuda_stack, monkeypatch):
    """``envman base make`` records the base it imports; a stand-in the user made is named in
    ENVMAN_TRUSTED_IMAGES. Either is built on by ID, with nothing to pull."""
    engine = Registry()
    mine = engine.add_image(CUDA, labels={})
    P.record_built(mine, CUDA)
    got = B.build_stack(engine, cuda_stack)
    assert from_line(engine.contexts[-1]) == mine and engine.build_calls[-1]["pull"] is False
    assert P.built_here(got.image_id, base=mine)

    other = Registry()
    standin = other.add_image(CUDA, labels={})
    monkeypatch.setenv(P.TRUSTED_IMAGES_ENV, f"sha256:{'0' * 64}, {standin}")
    B.build_stack(other, cuda_stack)
    assert from_line(other.contexts[-1]) == standin and other.build_calls[-1]["pull"] is False


@pytest.mark.parametrize("value", ["{id}x", "{hex}", "x{id}", "{id}:latest"])
def test_a_trusted_id_must_be_written_exactly(cuda_stack, monkeypatch, value):
    engine = Registry()
    standin = engine.add_image(CUDA, labels={})
    monkeypatch.setenv(P.TRUSTED_IMAGES_ENV, value.format(id=standin, hex=standin[7:]))
    with pytest.raises(EnvmanError) as e:  # neither vouched for nor in the registry: the build's pull fails
        B.build_stack(engine, cuda_stack)
    assert e.value.what.startswith(f"pull {CUDA}")


def test_a_build_that_had_to_pull_and_failed_says_why_it_pulled(cuda_stack):
    engine = FakeEngine(fail_build=True, build_error=BuildError("pull access denied for envman/local-base"))
    engine.plant = Registry.plant.__get__(engine)  # type: ignore[attr-defined]
    engine.plant(CUDA)
    with pytest.raises(BuildError) as e:
        B.build_stack(engine, cuda_stack)
    assert "neither pulled from its registry nor built or imported by you" in e.value.fix
    assert "\n" not in e.value.fix


def test_a_rebuilt_base_starts_from_its_os_image_by_digest_or_pulls_it():
    """The same rule one level down: NVIDIA's recipe starts FROM ubuntu:22.04."""
    from envman.engine.builder import ClassicBuilder
    from envman.images.base import ensure_base

    class Base:
        tag = "12.4.1-base-ubuntu22.04"
        recipe_hash = "cd" * 32
        sources = ("recipe @ 0000",)
        ref = f"envman/base:{tag}"
        nvidia_ref = CUDA

        def context(self):
            return {"Dockerfile": b"FROM ubuntu:22.04\nRUN true\n"}

    engine = Registry()
    genuine = engine.publish("ubuntu:22.04")
    first = ensure_base(engine, ClassicBuilder(engine), Base())
    assert from_line(engine.contexts[-1]) == engine.inspect_image(genuine).repo_digests[0]
    assert engine.build_calls[-1]["pull"] is False and _built_on(engine, first.image_id, genuine)
    engine.plant("ubuntu:22.04")
    second = ensure_base(engine, ClassicBuilder(engine), Base(), nocache=True)
    assert engine.build_calls[-1]["pull"] is True and _built_on(engine, second.image_id, genuine)


@pytest.mark.parametrize("dockerfile, images", [
    ("FROM a AS b\nFROM b\n", ["a"]),
    ("FROM --platform=linux/arm64 c:1 AS D\nfrom d\nFROM scratch\n", ["c:1"]),
    (f"FROM sha256:{'a' * 64}\nFROM ${{BASE}}\nFROM x\nFROM x\n", ["x"]),
    ("RUN echo FROM y\n# FROM z\n", []),
])
def test_from_images_are_the_images_a_dockerfile_starts_from(dockerfile, images):
    assert P.from_images(dockerfile) == images


@pytest.mark.parametrize("a, b, same", [
    ("ubuntu:24.04", "docker.io/library/ubuntu", True), ("library/ubuntu", "ubuntu", True),
    ("index.docker.io/library/ubuntu:1", "ubuntu", True), ("nvidia/cuda", "nvidia/cuda2", False),
    ("localhost/nvidia/cuda", "nvidia/cuda", False), ("localhost:5000/nvidia/cuda", "nvidia/cuda", False),
    ("docker.io/nvidia/cuda:1@sha256:" + "1" * 64, "nvidia/cuda", True), ("quay.io/x:1", "x", False),
])
def test_repositories_compare_in_one_spelling(a, b, same):
    assert (P.repository(a) == P.repository(b)) is same


def test_an_upstream_base_removed_since_is_pulled_again_and_the_stack_rebuilt_on_the_registry_s_image(cuda_stack):
    """Boundary: with the name gone from the engine, nothing local vouches for what the stack was
    built on, and a neighbour could tag the name before the FROM step: the build pulls."""
    engine = Registry()
    genuine = engine.publish(CUDA)
    B.build_stack(engine, cuda_stack)
    engine._tags.pop(CUDA)  # docker rmi of the name (the image stays: the stack is built on it)
    again = B.build_stack(engine, cuda_stack)
    assert not again.cached and engine.build_calls[-1]["pull"] is True and _built_on(engine, again.image_id, genuine)
