"""Tests of ``envman/cli/matrix.py``, moved unchanged from the former ``test_daily_use.py``
(which tested several modules)."""

from __future__ import annotations

from envman.run.envs import one
from tests.unit.run.test_envs import envman_helper  # noqa: F401 (shared with that file)


def test_explain_names_a_compatible_build_and_reads_the_host_driver(tmp_path):
    import json
    import shutil

    env = {"ENVMAN_STATE_DIR": str(tmp_path / "s"), "ENVMAN_CONFIG_DIR": str(tmp_path / "c")}
    p = envman_helper("matrix", "explain", "torch-2.4-cuda12", "--gpu", "RTX 5090", "--driver", "570.86", "--json", env=env)
    doc = json.loads(p.stdout)
    assert p.returncode == 1 and doc["verdict"] == "arch_unsupported"
    alt = doc["alternative"]
    assert alt and alt.startswith("torch-")
    ok = envman_helper("matrix", "explain", alt, "--gpu", "RTX 5090", "--driver", "570.86", "--json", env=env)
    assert ok.returncode == 0, ok.stdout  # the named build does run there
    text = envman_helper("matrix", "explain", "torch-2.4-cuda12", "--gpu", "RTX 5090", "--driver", "570.86", env=env)
    assert f"compatible: {alt}" in text.stdout
    fine = json.loads(envman_helper("matrix", "explain", "torch-2.4-cuda12", "--sm", "8.6", "--driver", "570.86", "--json",
                              env=env).stdout)
    assert fine["alternative"] is None
    host = envman_helper("matrix", "explain", "torch-2.4-cuda12", "--sm", "8.6", env=env)
    if shutil.which("nvidia-smi") is None:  # no driver to read here: one line that says to give one
        assert host.returncode == 2 and host.stderr.count("\n") == 1 and "--driver" in host.stderr
    else:
        assert host.returncode in (0, 1) and "on driver" in host.stdout
