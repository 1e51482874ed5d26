"""Tests of ``envman/run/command.py``, moved unchanged from the former ``test_daily_use.py``
(which tested several modules)."""

from __future__ import annotations


def test_a_project_build_shows_its_steps_but_not_one_line_per_label(capsys):
    """The classic builder turns each label into a LABEL step: a project build printed 22 steps,
    16 of them labels. Steps are shown; label steps are not."""
    from envman.engine.api import BuildEvent
    from envman.run.command import print_step

    steps = ["Step 1/22 : FROM sha256:abc", "Step 2/22 : USER root", "Step 3/22 : RUN pip install -r x",
             *[f"Step {i}/22 : LABEL envman.k{i}=v" for i in range(4, 20)], "Step 20/22 : label x=y",
             "Step 5/7 : RUN echo LABEL", "Step 2/5 : LABEL a=b c=d"]
    for s in steps:
        print_step(BuildEvent("step", s, step=s.split()[1]))
    shown = capsys.readouterr().err.splitlines()
    assert shown == [f"  {s}" for s in steps if " : LABEL " not in s.upper()]
    assert len(shown) == 4


# --- the network options of the builds a run makes -------------------------------------------


PEM = b"-----BEGIN CERTIFICATE-----\nMIIBrun\n-----END CERTIFICATE-----\n"


def _capture_build(monkeypatch):
    """Run ``project_image_builder``'s build with the engine and the build replaced; what it passed."""
    import contextlib

    import envman.engine.docker as docker_mod
    import envman.project.image as image_mod

    seen: dict = {}

    def fake_build(engine, project, stack_name, base_id, **kw):
        seen.update(kw)
        return "envman/project-x:1"

    monkeypatch.setattr(image_mod, "build_project_image", fake_build)
    monkeypatch.setattr(docker_mod.Engine, "connect", classmethod(lambda cls: contextlib.nullcontext(object())))
    return seen


def _project_and_stack():
    from types import SimpleNamespace

    return SimpleNamespace(name="demo"), SimpleNamespace(name="cpu-py3.12")


def test_a_runs_project_build_goes_through_config_tomls_ca_bundle(tmp_path, monkeypatch):
    """The project image a run builds once ignored [network] of config.toml: behind a
    TLS-inspecting proxy its requirements could not install, and the hint said to set what was set."""
    from envman.run.command import project_image_builder

    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "cfg"))
    (tmp_path / "cfg").mkdir()
    (tmp_path / "corp.pem").write_bytes(PEM)
    (tmp_path / "cfg" / "config.toml").write_text(
        f'[network]\nca_bundle = "{tmp_path / "corp.pem"}"\npip_index = "https://pip.run.test/simple"\n')
    seen = _capture_build(monkeypatch)
    project_image_builder()(*_project_and_stack(), "sha256:" + "a" * 64)
    assert seen["network"].ca_bundle == tmp_path / "corp.pem"
    assert seen["network"].pip_index == "https://pip.run.test/simple"


def test_run_ca_bundle_wins_over_config_toml(tmp_path, monkeypatch):
    from envman.run.command import checked_ca_bundle, project_image_builder

    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "cfg"))
    (tmp_path / "cfg").mkdir()
    (tmp_path / "a.pem").write_bytes(PEM)
    (tmp_path / "b.pem").write_bytes(PEM)
    (tmp_path / "cfg" / "config.toml").write_text(f'[network]\nca_bundle = "{tmp_path / "a.pem"}"\n')
    seen = _capture_build(monkeypatch)
    project_image_builder(ca_bundle=checked_ca_bundle(str(tmp_path / "b.pem")))(*_project_and_stack(), "sha256:1")
    assert seen["network"].ca_bundle == tmp_path / "b.pem"


def test_run_shell_and_notebook_take_ca_bundle_and_refuse_a_bad_one_in_one_line(tmp_path):
    from tests.support.cli import run_envman

    (tmp_path / "not.pem").write_text("hello\n")
    for cmd in (["run", "--ca-bundle", str(tmp_path / "not.pem"), "--dry-run"],
                ["shell", "--ca-bundle", str(tmp_path / "missing.pem")],
                ["notebook", "--ca-bundle", str(tmp_path / "not.pem")]):
        r = run_envman(cmd, cwd=tmp_path)
        assert r.returncode == 2, (cmd, r.stderr)
        assert "CA bundle" in r.stderr and "--ca-bundle" in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
