"""``envman matrix update``'s run, apart from what it derives (``envman/matrix/refresh.py``): the
options turned into the run's settings, the files the new rows are compared with, and what
``--check`` reports. What a run derives from the indexes: ``test_update_rules.py``."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from envman.errors import UserError
from envman.matrix import refresh as R
from envman.matrix.index import PYPI_SIMPLE
from envman.matrix.update import PROJECTS, TORCH_INDEX


@pytest.fixture(autouse=True)
def _config(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))


def network(pip_index=None, ca_bundle=None):
    seen = []

    def merge(options):
        seen.append(options)
        return SimpleNamespace(pip_index=options["pip_index"] or pip_index, ca_bundle=options["ca_bundle"] or ca_bundle)

    return merge, seen


def settings(**kw):
    merge, _ = network()
    return R.update_settings(R.UpdateRequest(**kw), merge)[0]


def test_by_default_every_framework_and_cuda_are_read_from_pypi_and_the_torch_index():
    s = settings()
    assert s.index == PYPI_SIMPLE and s.torch_index == TORCH_INDEX and not s.torch_index_required
    assert s.frameworks == tuple(PROJECTS) and s.cuda and s.backfill


def test_frameworks_by_any_name_narrow_the_run_and_leave_cuda_out():
    s = settings(frameworks=("ort", "TF", "pytorch", "torch"))
    assert s.frameworks == ("onnxruntime", "tensorflow", "torch") and not s.cuda
    with pytest.raises(UserError) as e:
        settings(frameworks=("mxnet",))
    assert "unknown framework 'mxnet'" in e.value.line()


@pytest.mark.parametrize("kw, said", [
    ({"output": Path("o.toml"), "write": True}, "give -o FILE or --write, not both"),
    ({"check": True, "write": True}, "--check only reports; it writes nothing"),
    ({"check": True, "output": Path("o.toml")}, "--check only reports; it writes nothing"),
])
def test_options_that_exclude_each_other_are_refused(kw, said):
    with pytest.raises(UserError) as e:
        settings(**kw)
    assert said in e.value.line()


def test_a_named_torch_index_is_required_and_none_can_be_asked_for():
    s = settings(torch_index="https://mirror.example/whl")
    assert s.torch_index == "https://mirror.example/whl" and s.torch_index_required
    assert settings(no_torch_index=True).torch_index is None
    with pytest.raises(UserError) as e:
        settings(torch_index="not a url")
    assert "--torch-index" in e.value.line()


def test_new_only_turns_the_backfill_off():
    assert not settings(new_only=True).backfill


def test_the_network_options_go_through_the_merge_into_the_index_and_the_client():
    merge, seen = network()
    s, http = R.update_settings(R.UpdateRequest(pip_index="https://pypi.example/simple", timeout=7.5), merge)
    assert seen == [{"pip_index": "https://pypi.example/simple", "ca_bundle": None}]
    assert s.index == "https://pypi.example/simple"
    assert http.requests == 0 and http.timeout == 7.5


def source(tmp_path):
    shipped = [tmp_path / "shipped" / "torch.toml"]
    return SimpleNamespace(shipped_files=shipped, files=[*shipped, tmp_path / "mine.toml"])


def test_check_and_write_compare_with_the_shipped_matrix_alone(tmp_path):
    src = source(tmp_path)
    assert R.compared_files(R.UpdateRequest(check=True), src) == src.shipped_files
    assert R.compared_files(R.UpdateRequest(write=True), src) == src.shipped_files


def test_an_overlay_is_compared_with_what_the_user_loads_and_itself_once_it_exists(tmp_path):
    src = source(tmp_path)
    assert R.compared_files(R.UpdateRequest(), src) == src.files  # a dry run
    out = tmp_path / "mine.toml"  # one of the user's files, not written yet
    assert R.compared_files(R.UpdateRequest(output=out), src) == src.shipped_files
    out.write_text("")
    assert R.compared_files(R.UpdateRequest(output=out), src) == [*src.shipped_files, out]


def test_a_check_report_says_whether_the_matrix_is_behind():
    assert R.CheckReport({"jax": ["0.13.0"]}, 4, 1.5).summary() == {
        "behind": True, "new_releases": {"jax": ["0.13.0"]}, "requests": 4, "seconds": 1.5}
    assert R.CheckReport({}, 2, 0.1).summary()["behind"] is False
