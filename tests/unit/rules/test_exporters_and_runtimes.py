"""Security by rule: exporters and Slurm runtimes.

Each table is the list the code uses (imported, not copied), so an entry dropped from the code fails here."""

from __future__ import annotations

import json
import os
import shlex
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from envman.errors import UserError

from tests.support.cli import run_envman

from tests.support.security_rules import SECRETS, STACK, cli_env, slurm_job


def _export_input(**kw):
    from envman.cluster.export import ExportInput
    from envman.matrix.load import load_matrix
    from envman.project.file import GpuRequest, Mount
    from envman.stack.resolve import resolve

    base = dict(project="p", root=Path("/srv/p"), stack=resolve(load_matrix(), "torch-2.4-cuda12.4"),
                image="reg.example:5000/envman/x@sha256:" + "a" * 64, command=("python", "t.py"),
                environment=SECRETS, mounts=(Mount("/srv/data", "/data", True), Mount("/srv/out", "/out")), ports=(),
                gpus=GpuRequest("count", count=1), shm_size="8g")
    base.update(kw)
    return ExportInput(**base)


def _exports(x) -> dict[str, str]:
    from envman.cluster.export import compose, compose_service, devcontainer, k8s_job, to_yaml

    job, _ = k8s_job(x, gpus=1)
    doc, dockerfile = devcontainer(x, "/state/exports/p.env")
    return {"k8s": to_yaml(job), "devcontainer": json.dumps(doc) + dockerfile,
            "compose": to_yaml(compose({"p": compose_service(x, uid=1000, gid=1000, home="/h")}))}


@pytest.mark.parametrize("exporter", ["k8s", "devcontainer", "compose"])
def test_no_exporter_writes_any_environment_value(exporter):
    text = _exports(_export_input())[exporter]
    for name, value in SECRETS:
        assert value not in text, (exporter, name)
        assert name in text or exporter == "devcontainer"  # by name (the Dev Container: by its env file)


def test_every_environment_value_reaches_the_env_files_literally():
    from envman.cluster.export import env_file_text, shell_env_file_text

    env = SECRETS + (("ODD", "a b 'c' \"d\" $HOME `x` #e"),)
    assert env_file_text(env).splitlines() == [f"{k}={v}" for k, v in env]
    import subprocess

    out = subprocess.run(["sh", "-c", shell_env_file_text(env) + 'printf "%s" "$ENVMAN_ENV_ODD"'], capture_output=True, text=True)
    assert out.stdout == env[-1][1]


@pytest.mark.parametrize("exporter", ["devcontainer", "compose"])
@pytest.mark.parametrize("source", ["/etc", "/var/run/docker.sock", "/", "~/.ssh"])
def test_every_exporter_holds_mounts_to_the_run_policy(home, exporter, source):
    from envman.project.file import Mount

    src = source.replace("~", str(home))
    with pytest.raises(UserError, match="refused"):
        _exports(_export_input(mounts=(Mount(src, "/x"),)))[exporter]


MOUNT_SYNTAX = st.text(alphabet=st.sampled_from("abc/.,=\"'${}: -_x"), min_size=1, max_size=12)


@given(MOUNT_SYNTAX, MOUNT_SYNTAX, st.booleans())
@settings(max_examples=200, deadline=None)
def test_devcontainer_mounts_are_exact_or_refused(src, dst, ro):
    """By grammar: whatever the paths hold, an exported mount is exactly the validated one (as
    the Dev Containers tools join its fields) or the export is refused."""
    from envman.cluster.export import devcontainer
    from envman.project.file import Mount

    mount = Mount("/srv/" + src, "/t/" + dst, ro)
    try:
        doc, _ = devcontainer(_export_input(mounts=(mount,)), "/e")
    except UserError:
        return
    fields = [f"type=bind,source={m['source']},target={m['target']}" for m in doc["mounts"]]
    args = doc["runArgs"]
    fields += [args[i + 1] for i, a in enumerate(args) if a == "--mount"]
    assert len(fields) == 1
    parsed = dict(f.split("=", 1) for f in next(iter(fields)).split(",") if "=" in f)
    assert (parsed["source"], parsed["target"]) == (os.path.realpath(mount.source), mount.target)  # the path checked
    assert ("readonly" in fields[0]) == ro


def test_the_issue_s_devcontainer_mount_cannot_reach_etc(home, tmp_path):
    root = tmp_path / "p"
    (root / "data").mkdir(parents=True)
    (root / "envman.toml").write_text(STACK + 'mounts = ["./data:/t,source=/etc:ro"]\n')
    env = cli_env(tmp_path)
    assert run_envman(["project", "trust", str(root)], env=env).returncode == 0
    r = run_envman(["export", "devcontainer", str(root), "-o", "-"], env=env)
    errors = [ln for ln in r.stderr.splitlines() if not ln.startswith("warning: ")]  # no image to check yet: a warning
    assert r.returncode == 2 and "mount syntax" in r.stderr and len(errors) == 1, r.stderr
    assert "/etc" not in r.stdout


def test_export_never_writes_through_a_symlinked_devcontainer_folder(home, tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    (root / "envman.toml").write_text(STACK)
    victim = tmp_path / "victim"
    victim.mkdir()
    (root / ".devcontainer").symlink_to(victim)
    r = run_envman(["export", "devcontainer", str(root)], env=cli_env(tmp_path))
    assert r.returncode == 2 and "symbolic link" in r.stderr, r.stderr
    assert list(victim.iterdir()) == []


RUNTIMES = ["docker", "podman", "pyxis", "apptainer", "charliecloud"]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_no_slurm_runtime_puts_a_value_on_a_command_line_or_in_the_script(home, tmp_path, runtime):
    import shlex
    import subprocess

    from envman.cluster.slurm import env_file_text, render_script, submit

    spec = slurm_job(runtime, tmp_path)
    script = render_script(spec)
    for _, value in SECRETS:
        assert value not in script, runtime
    calls = []

    def fake(argv):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "41\n", "")

    submit(spec, fake)
    assert not any(value in " ".join(c) for c in calls for _, value in SECRETS)
    text = env_file_text(spec)
    if runtime in ("docker", "podman"):  # envman run on the node reads the project itself
        assert text == "" and not Path(spec.env_file).exists()
        return
    assert all(value in text for _, value in SECRETS)
    assert stat.S_IMODE(os.stat(spec.env_file).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(Path(spec.env_file).parent).st_mode) == 0o700
    words = [w for line in script.splitlines() if not line.startswith("#") for w in shlex.split(line, comments=True)]
    assert spec.env_file in words or f"--set-env={spec.env_file}" in words


def test_submit_dry_run_shows_names_not_values(home, tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    (root / "envman.toml").write_text(STACK + 'command = ["python", "t.py"]\n[environment]\n'
                                      + "".join(f'{k} = "{v}"\n' for k, v in SECRETS))
    env = cli_env(tmp_path)
    assert run_envman(["project", "trust", str(root)], env=env).returncode == 0
    for runtime in RUNTIMES:
        r = run_envman(["submit", str(root), "--runtime", runtime, "--dry-run", "--image", "img:1"]
                       if runtime not in ("docker", "podman") else ["submit", str(root), "--runtime", runtime, "--dry-run"],
                       env=env)
        assert r.returncode == 0, (runtime, r.stderr)
        assert not any(v in r.stdout + r.stderr for _, v in SECRETS), runtime
        if runtime not in ("docker", "podman"):
            assert all(k in r.stdout for k, _ in SECRETS), runtime
