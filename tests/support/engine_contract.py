"""What every engine implementation must do: one set of behaviour tests for all of them.

A test module subclasses :class:`EngineContract` and provides four fixtures:

* ``writer``: a :class:`envman.engine.api.ContainerEngine` that builds, runs, tags and removes;
* ``reader``: the :class:`envman.engine.api.EngineFacts` under test, looking at the same engine
  (the writer itself, or a second client of it such as the Unix-socket one);
* ``base``: an image ref on that engine to build ``FROM`` and run (``true`` and ``sh`` work in it);
* ``labels``: labels unique to the test (``envman.*``), put on everything it creates.

``tests/unit/engine/test_api_contract.py`` runs it on the fake engine (no daemon);
``tests/docker/test_engine_contract.py`` on the Docker SDK engine and on the socket client (with
and without the socket, i.e. through the ``docker`` CLI) against a real engine. Everything a test
creates is removed by the test.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping

import pytest

from envman import labels as L
from envman.engine.api import ContainerEngine, ContainerInfo, EngineFacts, EngineInfo, ImageInfo
from envman.engine.context import deterministic_tar


def _ref(name: str) -> str:
    return f"envman-test/contract-{name}:{uuid.uuid4().hex[:12]}"


class EngineContract:
    """Behaviour tests over ``reader`` / ``writer`` / ``base`` / ``labels`` (see the module docstring)."""

    @pytest.fixture
    def built(self, writer: ContainerEngine, base: str, labels: Mapping[str, str]) -> Iterator[tuple[str, str]]:
        """(tag, image id) of a one-line build ``FROM base`` carrying ``labels``; removed afterwards."""
        tag = _ref("built")
        context = deterministic_tar({"Dockerfile": f"FROM {base}\nCOPY hello.txt /hello.txt\n".encode(),
                                     "hello.txt": tag.encode()})
        events = list(writer.build(context, tag, labels={**labels, L.ROLE: "candidate"}))
        done = events[-1]
        assert done.kind == "done" and done.image_id
        try:
            yield tag, done.image_id
        finally:
            writer.remove_image(tag, force=True)

    # -- engine facts ---------------------------------------------------------------------------

    def test_info_is_typed_and_says_how_gpus_are_given(self, reader: EngineFacts) -> None:
        info = reader.info()
        assert isinstance(info, EngineInfo)
        assert info.kind in ("docker", "podman") and info.kind == reader.kind().kind
        assert info.server_version and info.version
        assert isinstance(info.runtimes, tuple) and all(isinstance(r, str) for r in info.runtimes)
        assert info.gpu_mechanism() in ("runtime", "cdi", None)
        assert info.nvidia_runtime == (info.kind == "docker" and "nvidia" in info.runtimes)

    # -- images ---------------------------------------------------------------------------------

    def test_an_unknown_image_is_none_not_an_error(self, reader: EngineFacts) -> None:
        missing = _ref("missing")
        assert reader.inspect_image(missing) is None
        assert reader.image_exists(missing) is False
        assert reader.inspect_image("sha256:" + "0" * 64) is None

    def test_a_build_is_found_by_tag_id_and_labels(self, reader: EngineFacts, built: tuple[str, str],
                                                   labels: Mapping[str, str]) -> None:
        tag, image_id = built
        info = reader.inspect_image(tag)
        assert isinstance(info, ImageInfo)
        assert info.id == image_id and image_id.startswith("sha256:")
        assert tag in info.tags and info.created > 0
        assert {**labels, L.ROLE: "candidate"}.items() <= info.labels.items()
        assert reader.image_exists(tag)
        by_id = reader.inspect_image(image_id)
        assert by_id is not None and by_id.id == image_id and tag in by_id.tags

        listed = reader.list_images({**labels, L.ROLE: "candidate"})
        assert [i.id for i in listed] == [image_id]
        assert tag in listed[0].tags and listed[0].created == info.created and listed[0].labels == info.labels
        assert [i.id for i in reader.list_images([*(f"{k}={v}" for k, v in labels.items()), L.ROLE])] == [image_id]
        assert reader.list_images({**labels, L.ROLE: "stable"}) == []

    def test_a_build_inherits_the_labels_of_its_base(self, reader: EngineFacts, built: tuple[str, str],
                                                     base: str) -> None:
        tag, _ = built
        base_info = reader.inspect_image(base)
        info = reader.inspect_image(tag)
        assert base_info is not None and info is not None and base_info.id != info.id
        assert base_info.labels.items() <= info.labels.items()

    def test_tag_points_a_second_name_and_remove_takes_only_that_name(
            self, reader: EngineFacts, writer: ContainerEngine, built: tuple[str, str]) -> None:
        tag, image_id = built
        second = _ref("second")
        writer.tag(image_id, second)
        try:
            info = reader.inspect_image(second)
            assert info is not None and info.id == image_id and {tag, second} <= set(info.tags)
        finally:
            assert writer.remove_image(second) is True
        assert reader.inspect_image(second) is None
        assert writer.remove_image(second) is False  # already gone: tolerated
        still = reader.inspect_image(tag)
        assert still is not None and still.id == image_id and second not in still.tags

    # -- containers -----------------------------------------------------------------------------

    def test_a_run_is_labelled_managed_and_removed(self, reader: EngineFacts, writer: ContainerEngine,
                                                   base: str, labels: Mapping[str, str]) -> None:
        result = writer.run(base, ["true"], labels=labels, remove=True, timeout=60)
        assert result.exit_code == 0 and result.ok and not result.timed_out
        assert reader.list_containers(labels) == []

    def test_a_kept_container_is_found_by_labels_name_and_id(self, reader: EngineFacts, writer: ContainerEngine,
                                                             base: str, labels: Mapping[str, str]) -> None:
        base_id = reader.inspect_image(base)
        assert base_id is not None
        writer.run(base, ["true"], labels=labels, remove=False, timeout=60)
        try:
            found = reader.list_containers(labels)
            assert len(found) == 1 and isinstance(found[0], ContainerInfo)
            c = found[0]
            assert {**labels, **L.MANAGED_LABELS}.items() <= c.labels.items()
            assert c.state == "exited" and c.image == base and c.image_id == base_id.id and c.name and c.created > 0
            assert reader.list_containers(labels, all=False) == []  # not running
            for ref in (c.id, c.name):
                again = reader.inspect_container(ref)
                assert again is not None and (again.id, again.name, again.state, again.image_id) == \
                    (c.id, c.name, c.state, c.image_id)
                assert again.labels == c.labels and abs(again.created - c.created) <= 1
        finally:
            for c in reader.list_containers(labels):
                assert writer.remove_container(c.id) is True
        assert reader.list_containers(labels) == []
        assert reader.inspect_container(found[0].id) is None
        assert writer.remove_container(found[0].id) is False

    def test_an_unknown_container_is_none(self, reader: EngineFacts) -> None:
        assert reader.inspect_container(f"envman-test-missing-{uuid.uuid4().hex[:12]}") is None
