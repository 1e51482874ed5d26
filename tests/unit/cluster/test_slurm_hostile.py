"""A project's variables reach the job's container and nothing else: the batch shell of a Slurm
job that sources them (pyxis, apptainer) never holds one the shell, the loader, ``srun`` or the
container runtime would obey on the host (``PATH`` picks the ``srun`` that runs, ``LD_PRELOAD``
loads code into it, ``SLURM_*`` set srun's options)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from envman.cluster import slurm as S
from envman.cluster.slurm import JobSpec, Resources
from envman.errors import UserError

#: Names a host process reads (glibc's setuid list, the shell's, srun's input variables and
#: --export keywords, pyxis's and enroot's settings): a sample of each kind, one per rule.
HOST_NAMES = ("PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GCONV_PATH", "GLIBC_TUNABLES", "HOSTALIASES",
              "TMPDIR", "IFS", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND",
              "BASH_FUNC_srun%%", "SLURM_EXPORT_ENV", "SLURM_CONTAINER", "SRUN_EXPORT_ENV", "SBATCH_EXPORT",
              "SPANK_X", "_SLURM_SPANK_OPTION_pyxis_container_mounts", "PYXIS_RUNTIME_PATH", "ENROOT_REMAP_ROOT",
              "XDG_DATA_HOME", "XDG_CONFIG_HOME", "MELLANOX_VISIBLE_DEVICES", "MALLOC_CHECK_", "ALL", "NONE", "NIL", "all", "None")
SOURCING = ("pyxis", "apptainer")


def _spec(runtime: str, environment) -> JobSpec:
    return JobSpec(project="p", root="/srv/p", stack="torch-2.4.1-cpu-py3.10", image="img:1", runtime=runtime,
                   resources=Resources(), envman=("python3", "-m", "envman"), command=("run",), home="/h",
                   state_dir="/s", config_dir="/c", env_file="/s/e.env", environment=tuple(environment))


def _sourced(text: str, tmp: Path) -> dict[str, str]:
    f = tmp / "job.env"
    f.write_text(text)
    base = {"PATH": "/usr/bin:/bin", "HOME": "/home/me", "LANG": "C.UTF-8"}
    out = subprocess.run(["/bin/sh", "-c", '. "$0"; exec env -0', str(f)], env=base, capture_output=True,
                         check=True).stdout.decode("utf-8", "surrogateescape")
    return dict(item.split("=", 1) for item in out.split("\0") if item)


@pytest.mark.parametrize("runtime", SOURCING)
@pytest.mark.parametrize("name", [n for n in HOST_NAMES if n.isidentifier()])
def test_the_batch_shell_never_holds_a_host_read_name_of_the_project(runtime, name, tmp_path):
    spec = _spec(runtime, [(name, "/tmp/evil")])
    try:
        S.render_script(spec)
    except UserError as e:  # refused: the job is never written
        assert name in e.what and e.where == "envman submit" and "apptainer" in (e.fix or "")
        return
    assert _sourced(S.env_file_text(spec), tmp_path).get(name) != "/tmp/evil"


@pytest.mark.parametrize("name", HOST_NAMES)
def test_pyxis_refuses_every_host_read_name_in_one_line(name):
    with pytest.raises(UserError) as e:
        S.render_script(_spec("pyxis", [("OK", "1"), (name, "x")]))
    assert e.value.what.startswith(f"environment {name}: a pyxis job passes") and "\n" not in e.value.what
    assert "OK" not in e.value.what


@pytest.mark.parametrize("runtime", ["apptainer", "charliecloud", "docker"])
def test_the_other_runtimes_pass_those_names_into_the_container(runtime):
    env = [(n, "x") for n in HOST_NAMES if n.isidentifier()]
    assert S.render_script(_spec(runtime, env))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True))
def test_pyxis_accepts_exactly_the_names_outside_the_rule(name):
    host = (name in S.PYXIS_HOST_NAMES or name.upper() in S.PYXIS_HOST_NAMES
            or name.startswith(S.PYXIS_HOST_PREFIXES))
    spec = _spec("pyxis", [(name, "v")])
    if host:
        with pytest.raises(UserError):
            S.render_script(spec)
    elif name != "HOME":
        assert f"--container-env=ENVMAN_PROJECT,ENVMAN_STACK,NVIDIA_VISIBLE_DEVICES,{name} " in S.render_script(spec)


@pytest.mark.parametrize("names,pronoun", [(("PATH",), "it"), (("PATH", "LD_PRELOAD"), "them")])
def test_pyxis_names_what_the_host_would_obey_in_one_exact_line(names, pronoun):
    with pytest.raises(UserError) as e:
        S.render_script(_spec("pyxis", [(n, "x") for n in names]))
    assert (e.value.what, e.value.where, e.value.fix) == (
        f"environment {', '.join(names)}: a pyxis job passes the project's variables through the shell that runs "
        f"srun, where the shell, the loader, srun or enroot would obey {pronoun} on the host", "envman submit",
        "rename the variable, or use --runtime apptainer, charliecloud or docker (they set it in the container only)")


@pytest.mark.parametrize("runtime", ["pyxis", "apptainer", "charliecloud"])
@pytest.mark.parametrize("side", ["source", "target"])
def test_a_bind_path_the_runtime_cannot_carry_is_refused_naming_the_runtime(runtime, side):
    from dataclasses import replace

    from envman.project.file import Mount

    bad = "/d,x" if side == "source" else "/t:x"
    mount = Mount(bad, "/data") if side == "source" else Mount("/srv/data", bad)
    with pytest.raises(UserError) as e:
        S.render_script(replace(_spec(runtime, []), mounts=(mount,)))
    assert (e.value.what, e.value.where, e.value.fix) == (
        f"path {bad!r} contains ',' or ':', which {runtime} bind specifications cannot carry", "envman submit",
        "move the project or mount to a path without them")
