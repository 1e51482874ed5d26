"""Tests of ``envman/matrix/source.py``, moved unchanged from the former ``test_runner.py``
(which tested several modules)."""

from __future__ import annotations

from envman.matrix.source import MatrixSource, resolve_cached

from tests.unit.run.test_plan import dirs  # noqa: F401 (shared with that file)


def test_stack_resolution_is_cached_on_the_matrix_files(tmp_path, mini):
    loads = []

    def load():
        loads.append(1)
        return mini

    a = resolve_cached("torch-2.4-cuda12.4", MatrixSource().fingerprint(), load)
    b = resolve_cached("torch-2.4-cuda12.4", MatrixSource().fingerprint(), load)
    assert a == b and loads == [1]
    extra = tmp_path / "extra.toml"
    extra.write_text("")
    resolve_cached("torch-2.4-cuda12.4", MatrixSource.of([str(extra)]).fingerprint(), load)
    assert loads == [1, 1]  # other matrix files, other cache key
