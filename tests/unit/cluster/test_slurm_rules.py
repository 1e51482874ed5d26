"""``envman submit`` / ``jobs`` / ``logs`` by rule (issue 23, the mutation run over
envman/cluster/slurm.py): every refusal exactly (what, where, fix), Slurm's time grammar as a
property, every runtime's batch script and env file exactly (golden files), every runtime's script
run with stand-in tools (each ``[environment]`` value reaches the container literally and never
an argv), and submission, job records and states against a fake cluster.

Golden files: tests/data/slurm/. After a deliberate change to a script, rewrite them with
``ENVMAN_REGEN_GOLDEN=1 pytest tests/unit/cluster/test_slurm_rules.py`` and review the diff."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from envman.cluster import slurm as S
from envman.cluster.slurm import JobRecord, JobSpec, JobState, Resources
from envman.errors import EnvmanError, UserError
from envman.project.file import Mount

GOLDEN = Path(__file__).resolve().parents[2] / "data" / "slurm"
RUNTIMES = S.RUNTIMES


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))


def _refusal(fn, *args, **kw) -> tuple[str, str, str | None, str | None]:
    with pytest.raises(EnvmanError) as e:
        fn(*args, **kw)
    return type(e.value).__name__, e.value.what, e.value.where, e.value.fix


# --------------------------------------------------------------------------- every refusal, exactly

PARTITION_FIX = "letters, digits and _.- (several: p1,p2); list them with sinfo -s"
TIME_FIX = "minutes (90), H:MM:SS (1:30:00), D-HH[:MM[:SS]] (2-12) or UNLIMITED"
MEM_FIX = "e.g. 16G, 512M or 2048 (megabytes)"
RUNTIME_FIX = "one of docker, podman, pyxis, apptainer, charliecloud"
IMAGE_FIX = "a registry reference (host/repo:tag or @sha256:...), or a path the runtime reads"

REFUSALS = [
    (S.check_partition, ("a b",), {}, ("UserError", "'a b' is not a partition name", "--partition", PARTITION_FIX)),
    (S.check_partition, ("",), {"where": "W"}, ("UserError", "'' is not a partition name", "W", PARTITION_FIX)),
    (S.check_time, ("1:60",), {}, ("UserError", "'1:60' is not a time limit", "--time", TIME_FIX)),
    (S.check_time, ("x",), {"where": "W"}, ("UserError", "'x' is not a time limit", "W", TIME_FIX)),
    (S.check_time, ("0:00",), {}, ("UserError", "'0:00' is a time limit of zero", "--time",
                                   "give a positive limit, or UNLIMITED")),
    (S.check_time, ("0-0",), {"where": "W"}, ("UserError", "'0-0' is a time limit of zero", "W",
                                              "give a positive limit, or UNLIMITED")),
    (S.check_mem, ("1.5G",), {}, ("UserError", "'1.5G' is not a memory size", "--mem", MEM_FIX)),
    (S.check_mem, ("0",), {"where": "W"}, ("UserError", "'0' is not a memory size", "W", MEM_FIX)),
    (S.check_count, (0,), {"where": "--cpus"}, ("UserError", "0 is not a count of at least 1", "--cpus",
                                                "give a whole number from 1 to 100000")),
    (S.check_count, (-1,), {"where": "--gpus", "minimum": 0},
     ("UserError", "-1 is not a count of at least 0", "--gpus", "give a whole number from 0 to 100000")),
    (S.check_runtime, ("rkt",), {}, ("UserError", "unknown runtime 'rkt'", "--runtime", RUNTIME_FIX)),
    (S.check_runtime, ("rkt",), {"where": "W"}, ("UserError", "unknown runtime 'rkt'", "W", RUNTIME_FIX)),
    (S.check_job_id, ("x1",), {}, ("UserError", "'x1' is not a Slurm job id", "envman logs",
                                   "a job number, as envman jobs lists them")),
    (S.check_job_id, ("0",), {"where": "W"}, ("UserError", "'0' is not a Slurm job id", "W",
                                              "a job number, as envman jobs lists them")),
    (S.check_image, ("",), {"runtime": "pyxis"}, ("UserError", "'' is not an image reference", "--image", IMAGE_FIX)),
    (S.check_image, ("img:1",), {"runtime": "docker"},
     ("UserError", "--image applies to the pyxis, apptainer and charliecloud runtimes", "--image",
      "docker jobs run the project's promoted image (envman run on the node)")),
    (S.check_image, ("img:1",), {"runtime": "podman"},
     ("UserError", "--image applies to the pyxis, apptainer and charliecloud runtimes", "--image",
      "podman jobs run the project's promoted image (envman run on the node)")),
]


@pytest.mark.parametrize("fn,args,kw,expected", REFUSALS, ids=[f"{r[0].__name__}-{i}" for i, r in enumerate(REFUSALS)])
def test_every_validator_refuses_with_its_exact_line(fn, args, kw, expected):
    assert _refusal(fn, *args, **kw) == expected


@pytest.mark.parametrize("value,out", [("debug", "debug"), ("p1,p2", "p1,p2"), ("a" * 64, "a" * 64), ("_x.y-z", "_x.y-z")])
def test_partitions_accepted(value, out):
    assert S.check_partition(value) == out


@pytest.mark.parametrize("value", ["a" * 65, "a,", ",a", "-a", ".a", "a;b", "a\n"])
def test_partitions_refused(value):
    with pytest.raises(UserError):
        S.check_partition(value)


@pytest.mark.parametrize("value,out", [("16G", "16G"), ("512m", "512M"), ("2048", "2048"), ("1t", "1T"), ("7k", "7K"),
                                       ("999999999", "999999999")])
def test_memory_sizes_are_normalised(value, out):
    assert S.check_mem(value) == out


@pytest.mark.parametrize("value", [" 16G", "16G ", "1000000000", "16P", "01G"])
def test_memory_sizes_refused(value):
    with pytest.raises(UserError):
        S.check_mem(value)


@pytest.mark.parametrize("value,minimum,ok", [(1, 1, True), (0, 0, True), (100_000, 1, True), (100_001, 1, False),
                                              (0, 1, False), (True, 0, False), ("3", 1, False), (2.0, 1, False)])
def test_count_boundaries(value, minimum, ok):
    if ok:
        assert S.check_count(value, where="w", minimum=minimum) == value
    else:
        with pytest.raises(UserError):
            S.check_count(value, where="w", minimum=minimum)


@pytest.mark.parametrize("value,out", [(" Docker ", "docker"), ("APPTAINER", "apptainer"), *((r, r) for r in RUNTIMES)])
def test_runtime_names(value, out):
    assert S.check_runtime(value) == out


@pytest.mark.parametrize("value,out", [("41", "41"), (" 41 ", "41"), ("9999999999", "9999999999")])
def test_job_ids(value, out):
    assert S.check_job_id(value) == out


@pytest.mark.parametrize("value", ["", "01", "10000000000", "4 1", "41.batch"])
def test_job_ids_refused(value):
    with pytest.raises(UserError):
        S.check_job_id(value)


@pytest.mark.parametrize("value,ok", [("img:1", True), ("a" * 512, True), ("a" * 513, False), ("-x", False),
                                      ("a b", False), ("a\tb", False), ("a\x1bb", False), ("/srv/x.sqsh", True)])
@pytest.mark.parametrize("runtime", ["pyxis", "apptainer", "charliecloud"])
def test_image_references(value, ok, runtime):
    if ok:
        assert S.check_image(value, runtime) == value
    else:
        with pytest.raises(UserError, match="is not an image reference"):
            S.check_image(value, runtime)


@pytest.mark.parametrize("runtime,image", [("apptainer", "docker-daemon:envman/s:latest"), ("pyxis", "dockerd://envman/s:latest"),
                                           ("charliecloud", "envman/s:latest"), ("docker", "envman/s:latest"),
                                           ("podman", "envman/s:latest")])
def test_each_runtime_reads_the_image_from_the_node_s_engine(runtime, image):
    assert S.default_image(runtime, "envman/s:latest") == image


# --------------------------------------------------------------------------- Slurm's time grammar


def _time_oracle(days: int | None, fields: list[int], widths: list[int]) -> str:
    """What Slurm accepts, from its documented formats: "minutes", "minutes:seconds",
    "hours:minutes:seconds", "days-hours", "days-hours:minutes", "days-hours:minutes:seconds"."""
    if days is not None:
        if fields[0] > 23 or widths[0] > 2 or any(f > 59 for f in fields[1:]):
            return "bad"
    elif any(f > 59 for f in fields[1:]):
        return "bad"
    return "zero" if not days and not any(fields) else "ok"


@given(st.one_of(st.none(), st.integers(0, 9999)), st.lists(st.integers(0, 99), min_size=1, max_size=3),
       st.lists(st.booleans(), min_size=3, max_size=3))
@settings(max_examples=400, deadline=None)
def test_time_limits_follow_slurm_s_grammar(days, fields, pads):
    texts = [f"{f:02d}" if pad else str(f) for f, pad in zip(fields, pads)]
    value = (f"{days}-" if days is not None else "") + ":".join(texts)
    expected = _time_oracle(days, fields, [len(t) for t in texts])
    if expected == "ok":
        assert S.check_time(value) == value
    else:
        with pytest.raises(UserError, match="time limit of zero" if expected == "zero" else "is not a time limit"):
            S.check_time(value)


@pytest.mark.parametrize("value,out", [("UNLIMITED", "UNLIMITED"), ("unlimited", "UNLIMITED"), ("Infinite", "INFINITE"),
                                       (" infinite ", "INFINITE"), ("1-023", None), ("1-23", "1-23"), ("1-05:59:59", "1-05:59:59"),
                                       (" 90", None), ("90 ", None), ("12345678", None), ("1234567", "1234567"),
                                       ("10000-1", None), ("9999-1", "9999-1"), ("1:2:3:4", None), ("1-", None)])
def test_time_limit_boundaries(value, out):
    if out is not None:
        assert S.check_time(value) == out
    else:
        with pytest.raises(UserError):
            S.check_time(value)


# --------------------------------------------------------------------------- the scripts, exactly

#: Values of every kind an [environment] may hold (the project file refuses line breaks and NUL).
VALUES = (("EMPTY", ""), ("SPACES", "a b  c"), ("SQ", "it's"), ("DQ", 'say "hi"'), ("DOLLAR", "$HOME ${X} $(id)"),
          ("TICK", "`id`"), ("HASH", "# not a comment"), ("EQ", "a=b=c"), ("DASH", "-n"), ("BACKSLASH", "a\\nb\\"),
          ("UNI", "Grüße ☃"), ("QUOTED", "'x'"), ("COMMA", "a,b"), ("STAR", "*"), ("SEMI", "a; rm -rf /"))


def _spec(runtime: str, case: str, tmp: str = "/state") -> JobSpec:
    if case == "full":
        mounts = (Mount("/srv/data", "/data", runtime != "charliecloud"), Mount("/srv/out", "/out"))
        return JobSpec(project="demo", root="/srv/projects/demo dir", stack="torch-2.4.1-cuda12.4-py3.10",
                       image="envman/torch-2.4.1-cuda12.4-py3.10:latest", runtime=runtime,
                       resources=Resources(partition="gpu,debug", gpus=2, time="1-00:30", cpus=8, mem="64G"),
                       envman=("/opt/venv/bin/python", "-m", "envman"), command=("python", "-c", "print('$(id); `x`')"),
                       matrix_files=("/m/x.toml", "/m/y z.toml"), environment=VALUES, mounts=mounts,
                       home="/state/homes/demo", state_dir="/state", config_dir="/config",
                       matrix_env="/m/a.toml:/m/b.toml", env_file=f"{tmp}/slurm/env/demo-1-2.env")
    return JobSpec(project="p", root="/srv/p", stack="torch-2.4.1-cpu-py3.10", image="img:1", runtime=runtime,
                   resources=Resources(), envman=("python3", "-m", "envman"), command=("run",), home="/h",
                   state_dir="/s", config_dir="/c", env_file=f"{tmp}/e.env")


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("ENVMAN_REGEN_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.read_text() == text, f"{name} differs from its golden file (ENVMAN_REGEN_GOLDEN=1 rewrites it)"


@pytest.mark.parametrize("case", ["full", "cpu"])
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_every_runtime_s_script_and_env_file_are_exactly_the_reviewed_ones(runtime, case):
    spec = _spec(runtime, case)
    _golden(f"{runtime}-{case}.sh", S.render_script(spec))
    _golden(f"{runtime}-{case}.env", S.env_file_text(spec))


def test_the_sbatch_command_and_the_directives():
    assert S.sbatch_argv(Path("/s/x.sh"), "/l/job-%j.log") == ["sbatch", "--parsable", "--output=/l/job-%j.log",
                                                               "--error=/l/job-%j.log", "/s/x.sh"]
    assert Resources().directives("envman-p") == ["--job-name=envman-p"]
    assert Resources("p", 1, "5", 2, "1G").directives("j") == ["--job-name=j", "--partition=p", "--gres=gpu:1", "--time=5",
                                                                "--cpus-per-task=2", "--mem=1G"]
    assert _spec("docker", "full").job_name == "envman-demo"


# --------------------------------------------------------------------------- the scripts, run

#: A stand-in for srun, apptainer, ch-run and ch-convert: it records its argv and the environment
#: the container would get, as each runtime builds it (pyxis: the variables --container-env names,
#: from the job's environment; apptainer: APPTAINERENV_*; ch-run: the --set-env file, one pair of
#: single quotes stripped, nothing expanded).
RECORDER = r'''#!{python}
import json, os, sys
name = os.path.basename(sys.argv[0])
env = None
if name == "srun":
    names = next(a for a in sys.argv if a.startswith("--container-env=")).split("=", 1)[1].split(",")
    env = {{k: os.environ[k] for k in names if k}}
elif name == "apptainer":
    env = {{k[len("APPTAINERENV_"):]: v for k, v in os.environ.items() if k.startswith("APPTAINERENV_")}}
elif name == "ch-run":
    env = {{}}
    for a in sys.argv:
        if a.startswith("--set-env="):
            for line in open(a.split("=", 1)[1], encoding="utf-8").read().splitlines():
                k, v = line.split("=", 1)
                env[k] = v[1:-1] if len(v) >= 2 and v[0] == v[-1] == "'" else v
elif name == "ch-convert":
    os.makedirs(sys.argv[-1])
with open(os.environ["RECORD"], "a", encoding="utf-8") as fh:
    fh.write(json.dumps({{"argv": sys.argv, "env": env}}) + "\n")
sys.exit(int(os.environ.get("RC_" + name.replace("-", "_"), "0")))
'''


def _run_job(tmp_path: Path, spec: JobSpec, node_check_rc: int = 0) -> tuple[int, list[dict]]:
    import json
    import re
    import sys

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("srun", "apptainer", "ch-run", "ch-convert"):
        (bin_dir / tool).write_text(RECORDER.format(python=sys.executable))
        (bin_dir / tool).chmod(0o755)
    (bin_dir / "docker").write_text(f"#!/bin/sh\necho sha256:{'d' * 64}\n")  # the image id charliecloud keys by
    (bin_dir / "docker").chmod(0o755)
    record = tmp_path / "calls.jsonl"
    stub = (f'envman() {{ printf "%s\\n" "{{\\"argv\\": [\\"envman\\"], \\"env\\": null}}" >> {shlex.quote(str(record))}; '
            f"return {node_check_rc}; }}")
    text = re.sub(r"(?m)^envman\(\) \{.*\}$", lambda _: stub, S.render_script(spec))
    assert stub in text
    env_text = S.env_file_text(spec)
    Path(spec.env_file).parent.mkdir(parents=True, exist_ok=True)
    Path(spec.env_file).write_text(env_text)
    (tmp_path / "job.sh").write_text(text)
    p = subprocess.run(["bash", str(tmp_path / "job.sh")], capture_output=True, text=True, timeout=60,
                       env={"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_ID": "7", "RECORD": str(record),
                            "HOME": str(tmp_path), "CUDA_VISIBLE_DEVICES": "1,3"})
    calls = [json.loads(ln) for ln in record.read_text().splitlines()] if record.exists() else []
    return p.returncode, calls


CONTAINER_RUNTIMES = ["pyxis", "apptainer", "charliecloud"]


@pytest.mark.parametrize("gpus", [0, 2])
@pytest.mark.parametrize("runtime", CONTAINER_RUNTIMES)
def test_each_value_reaches_the_container_literally_and_no_argv(tmp_path, runtime, gpus):
    spec = replace(_spec(runtime, "full", str(tmp_path)), state_dir=str(tmp_path / "st"),
                   resources=Resources(gpus=gpus))
    rc, calls = _run_job(tmp_path, spec)
    assert rc == 0, calls
    tools = [c["argv"][0].rsplit("/", 1)[-1] for c in calls]
    runner = {"pyxis": "srun", "apptainer": "apptainer", "charliecloud": "ch-run"}[runtime]
    assert tools[0] == "envman" and tools[-1] == runner
    env = calls[-1]["env"]
    want = {"ENVMAN_PROJECT": "demo", "ENVMAN_STACK": spec.stack, **dict(VALUES)}
    if runtime != "pyxis":  # pyxis: the image's HOME (enroot keeps its cache under the host's)
        want["HOME"] = "/home/envman"
    if runtime == "apptainer" and gpus:
        want["CUDA_VISIBLE_DEVICES"] = "1,3"
    if not gpus:  # envman run's rule for a run without GPUs
        want["NVIDIA_VISIBLE_DEVICES"] = "void"
    assert env == want
    for call in calls:
        for key, value in VALUES:
            if len(value) > 2:
                assert not any(value in a for a in call["argv"]), (key, call["argv"])
    argv = calls[-1]["argv"]
    assert {"pyxis": "--no-container-mount-home", "apptainer": "--no-home", "charliecloud": "--env-no-expand"}[runtime] in argv
    if runtime == "apptainer":
        assert ("--nv" in argv) == bool(gpus)


@pytest.mark.parametrize("runtime", CONTAINER_RUNTIMES)
def test_a_failed_node_check_ends_the_job_with_its_code_before_any_container(tmp_path, runtime):
    spec = replace(_spec(runtime, "full", str(tmp_path)), state_dir=str(tmp_path / "st"))
    rc, calls = _run_job(tmp_path, spec, node_check_rc=3)
    assert rc == 3 and [c["argv"][0] for c in calls] == ["envman"]


@pytest.mark.parametrize("runtime", CONTAINER_RUNTIMES)
def test_a_missing_env_file_ends_the_job_before_any_container(tmp_path, runtime):
    spec = replace(_spec(runtime, "full", str(tmp_path)), state_dir=str(tmp_path / "st"))
    text = S.render_script(spec)
    if runtime == "charliecloud":  # ch-run itself refuses a --set-env file it cannot read
        assert f"--set-env={spec.env_file}" in text
        return
    assert f". {shlex.quote(spec.env_file)} || exit 1" in text.splitlines()


@pytest.mark.parametrize("runtime", CONTAINER_RUNTIMES)
def test_runtimes_without_docker_refuse_what_they_cannot_express(runtime):
    base = _spec(runtime, "cpu")
    assert _refusal(S.render_script, replace(base, command=())) == (
        "UserError", f"runtime {runtime} needs a command", "envman submit",
        "give one after --, or set command = [...] in envman.toml")
    assert _refusal(S.render_script, replace(base, env_file="")) == (
        "UserError", f"runtime {runtime} needs an environment file", "envman submit", None)
    for bad in ("/a,b", "/a:b", "/a\nb"):
        for field in ("root", "home"):
            assert _refusal(S.render_script, replace(base, **{field: bad})) == (
                "UserError", f"path {bad!r} contains ',' or ':', which {runtime} bind specifications cannot carry",
                "envman submit", "move the project or mount to a path without them")
        for m in (Mount(bad, "/t"), Mount("/s", bad)):
            assert _refusal(S.render_script, replace(base, mounts=(m,)))[1].startswith(f"path {bad!r} contains")
    ro = replace(base, mounts=(Mount("/s", "/t", True),))
    if runtime == "charliecloud":
        assert _refusal(S.render_script, ro) == ("UserError", "charliecloud cannot bind a mount read-only", "envman submit",
                                                 "drop :ro from the project's mounts, or use --runtime apptainer")
    else:
        assert "/s:/t:ro" in S.render_script(ro)


@pytest.mark.parametrize("runtime", ["docker", "podman"])
def test_docker_and_podman_jobs_carry_no_values_and_need_no_env_file(runtime):
    spec = replace(_spec(runtime, "full"), env_file="", command=())
    text = S.render_script(spec)
    assert S.env_file_text(spec) == "" and not any(v in text for _, v in VALUES if len(v) > 2)
    assert "--gpus slurm --name \"$container\" &" in text  # no command: the project's own


# --------------------------------------------------------------------------- submitting, records, states


def _cp(argv, rc=0, out="", err=""):
    return subprocess.CompletedProcess(argv, rc, out, err)


class Cluster:
    """sinfo, sbatch, squeue and sacct as a fake cluster answers them (``answers``: argv[0] -> (rc, out, err))."""

    def __init__(self, **answers):
        self.calls: list[list[str]] = []
        self.answers = {"sinfo": (0, "debug*\ngpu\n", ""), "sbatch": (0, "41;cluster\n", ""),
                        "squeue": (0, "", ""), "sacct": (0, "", ""), **answers}

    def __call__(self, argv):
        self.calls.append(argv)
        answer = self.answers[argv[0]]
        return _cp(argv, *(answer(argv) if callable(answer) else answer))


def _files(base: Path) -> set[str]:
    return {str(p.relative_to(base)) for p in base.rglob("*") if p.is_file()} if base.exists() else set()


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_submit_writes_the_script_the_private_env_file_and_the_record(tmp_path, runtime):
    spec = _spec(runtime, "full", str(tmp_path / "state"))
    cluster = Cluster()
    rec = S.submit(spec, cluster, now=lambda: 1000.5)
    base = S.slurm_dir()
    assert [c[0] for c in cluster.calls] == ["sinfo", "sbatch"]
    assert cluster.calls[0] == ["sinfo", "--noheader", "--format=%P"]
    logs = str(base.absolute() / "logs")
    assert cluster.calls[1][:4] == ["sbatch", "--parsable", f"--output={logs}/job-%j.log", f"--error={logs}/job-%j.log"]
    assert rec == JobRecord("41", "demo", spec.stack, runtime, f"{logs}/job-41.log", str(base / "scripts" / "job-41.sh"),
                            1000.5, 2)
    assert Path(rec.script).read_text() == S.render_script(spec)
    assert not list((base / "scripts").glob("demo-*.sh"))  # renamed after the job's id
    assert stat.S_IMODE(os.stat(base / "logs").st_mode) == 0o700
    import json

    assert (base / "jobs" / "41.json").read_text() == json.dumps(rec.to_json(), indent=2, sort_keys=True) + "\n"
    assert cluster.calls[1][4] == str(base / "scripts" / f"demo-1000500-{os.getpid()}.sh")  # renamed once submitted
    assert S.load_records() == [rec] and S.record("41") == rec
    env = Path(spec.env_file)
    if runtime in ("docker", "podman"):
        assert not env.exists()
    else:
        assert env.read_text() == S.env_file_text(spec) and stat.S_IMODE(env.stat().st_mode) == 0o600
        assert stat.S_IMODE(env.parent.stat().st_mode) == 0o700


@pytest.mark.parametrize("err,cls", [("sbatch: error: invalid partition specified: x", UserError),
                                     ("sbatch: error: Requested node configuration is not available", UserError),
                                     ("error: Requested time limit is invalid (missing or exceeds some limit)", UserError),
                                     ("sbatch: error: Batch job submission failed: Node not available", UserError),
                                     ("sbatch: error: Batch job submission failed: Requested GRES option unsupported "
                                      "by configured SelectType plugin", UserError),
                                     ("sbatch: error: Batch job submission failed: Job violates accounting/QOS policy "
                                      "(job submit limit, user's size and/or time limits)", UserError),
                                     ("sbatch: error: Batch job submission failed: Unable to contact slurm controller",
                                      EnvmanError)])
@pytest.mark.parametrize("runtime", ["docker", "apptainer"])
def test_a_refused_submission_leaves_no_script_no_env_file_no_record(tmp_path, runtime, err, cls):
    spec = replace(_spec(runtime, "full", str(tmp_path / "state")), resources=Resources())
    with pytest.raises(EnvmanError) as e:
        S.submit(spec, Cluster(sbatch=(1, "", "first line\n" + err + "\n")))
    assert type(e.value) is cls
    assert (e.value.what, e.value.where, e.value.fix) == (
        "sbatch refused the job: " + err.removeprefix("sbatch: error: "), "envman submit",
        "check --partition/--gpus/--time/--cpus/--mem against sinfo -s and scontrol show partition")
    assert _files(S.slurm_dir()) == set() and not Path(spec.env_file).exists()


def test_sbatch_without_a_job_id_is_an_error(tmp_path):
    spec = replace(_spec("docker", "cpu", str(tmp_path)), resources=Resources())
    assert _refusal(S.submit, spec, Cluster(sbatch=(0, "Submitted batch job x\n", ""))) == (
        "EnvmanError", "sbatch printed no job id ('Submitted batch job x')", "envman submit", None)
    assert S.load_records() == []
    long = "y" * 79 + "zq"
    assert _refusal(S.submit, spec, Cluster(sbatch=(0, long + "\n", "")))[1] == (
        f"sbatch printed no job id ({long[:80]!r})")


def test_a_state_directory_with_a_backslash_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    state = tmp_path / "st\\ate"
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(state))
    spec = replace(_spec("docker", "cpu", str(state)), resources=Resources())
    cluster = Cluster()
    logs = str(S.slurm_dir().absolute() / "logs")
    assert _refusal(S.submit, spec, cluster) == (
        "UserError", f"envman's state directory {logs} contains a backslash, which sbatch's --output cannot carry",
        "envman submit", "set ENVMAN_STATE_DIR to a path without one")
    assert cluster.calls == [] and not state.exists()


@pytest.mark.parametrize("out,err,rc,shown", [("", "", 3, "exit 3"), ("only out\n", "", 1, "only out"),
                                              ("out\n", "  \nsbatch: error: last  \n", 1, "last"),
                                              ("", "x: sbatch: error: y\n", 1, "x: sbatch: error: y")])
def test_the_error_shown_is_the_last_line_slurm_printed(out, err, rc, shown):
    assert S._first_error(_cp(["sbatch"], rc, out, err)) == shown


def test_partitions_are_checked_against_the_cluster_before_anything_is_written(tmp_path):
    S.check_partition_exists("debug,gpu", Cluster())
    assert _refusal(S.check_partition_exists, "gpu,nope", Cluster()) == (
        "UserError", "partition 'nope' does not exist on this cluster", "--partition", "partitions here: debug, gpu")
    assert _refusal(S.check_partition_exists, "a", Cluster(sinfo=(0, "\n", ""))) == (
        "UserError", "partition 'a' does not exist on this cluster", "--partition", "partitions here: none")
    assert _refusal(S.check_partition_exists, "a", Cluster(sinfo=(1, "", "sinfo: error: down\n"))) == (
        "EnvmanError", "sinfo failed: sinfo: error: down", "envman submit", "check the cluster: scontrol ping")
    spec = replace(_spec("apptainer", "full", str(tmp_path / "state")), resources=Resources(partition="nope"))
    cluster = Cluster()
    with pytest.raises(UserError):
        S.submit(spec, cluster)
    assert [c[0] for c in cluster.calls] == ["sinfo"] and _files(S.slurm_dir()) == set()
    assert not Path(spec.env_file).exists()
    no_partition = replace(spec, resources=Resources())
    S.submit(no_partition, cluster := Cluster())
    assert [c[0] for c in cluster.calls] == ["sbatch"]


def _write_record(**kw) -> None:
    import json

    doc = dict(id="5", project="p", stack="s", runtime="docker", log="/l", script="/s", submitted=1.0, gpus=0)
    doc.update(kw)
    d = S.slurm_dir() / "jobs"
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(S.slurm_dir().parent, 0o700)
    path = d / f"{doc.get('id')}-{len(list(d.iterdir()))}.json"
    path.write_text(json.dumps({k: v for k, v in doc.items() if v is not ...}))
    path.chmod(0o600)


@pytest.mark.parametrize("bad", [dict(id="abc"), dict(id=5), dict(id="05"), dict(submitted="yesterday"), dict(submitted=True),
                                 dict(gpus="2"), dict(gpus=True), dict(log=None), dict(project=...), dict(script=3)])
def test_a_garbled_job_record_is_skipped_never_a_crash(bad):
    _write_record(id="7", submitted=2.0)
    _write_record(**bad)
    assert [r.id for r in S.load_records()] == ["7"]


@pytest.mark.parametrize("fields,kept", [
    (dict(submitted=0), True), (dict(submitted=S.MAX_SUBMITTED), True), (dict(submitted=S.MAX_SUBMITTED + 1), False),
    (dict(submitted=-0.5), False), (dict(submitted=float("nan")), False),
    (dict(gpus=0), True), (dict(gpus=S.MAX_GPUS), True), (dict(gpus=S.MAX_GPUS + 1), False), (dict(gpus=-1), False),
    (dict(submitted=-1, gpus=1), False), (dict(submitted=1, gpus=-1), False),
])
def test_a_record_s_time_and_gpus_are_believed_exactly_within_their_bounds(fields, kept):
    _write_record(id="6", **fields)
    assert [r.id for r in S.load_records()] == (["6"] if kept else [])


def test_a_record_without_gpus_has_none_and_one_past_64_kib_is_not_read():
    import json

    _write_record(id="6", gpus=...)
    assert [(r.id, r.gpus) for r in S.load_records()] == [("6", 0)]
    d = S.slurm_dir() / "jobs"
    for f in d.iterdir():
        f.unlink()
    doc = dict(id="7", project="p", stack="s", runtime="docker", log="/l", script="/s", submitted=1.0, gpus=0)
    for size, kept in ((64 * 1024, True), (64 * 1024 + 1, False)):
        text = json.dumps({**doc, "pad": ""})
        path = d / "7.json"
        path.write_text(json.dumps({**doc, "pad": "x" * (size - len(text))}))
        path.chmod(0o600)
        assert path.stat().st_size == size
        assert [r.id for r in S.load_records()] == (["7"] if kept else [])


def test_records_are_newest_first_then_by_id():
    _write_record(id="3", submitted=5.0)
    _write_record(id="10", submitted=5.0)
    _write_record(id="99", submitted=1.0)
    _write_record(id="2", submitted=7, gpus=1)
    assert [r.id for r in S.load_records()] == ["2", "10", "3", "99"]
    assert S.load_records()[0].submitted == 7.0 and S.load_records()[0].gpus == 1
    assert _refusal(S.record, "4") == ("UserError", "job 4 is not one of your envman jobs", "envman logs",
                                       "list them with envman jobs (other jobs: scontrol show job)")
    assert S.record(" 3 ").id == "3"


def test_read_log_gives_the_text_or_nothing_yet(tmp_path):
    log = tmp_path / "job.log"
    _write_record(id="8", log=str(log))
    assert S.read_log("8")[1] == ""
    log.write_bytes(b"ok \xff\n")
    rec, text = S.read_log("8")
    assert rec.id == "8" and text == "ok \ufffd\n"


def test_a_job_log_that_is_a_symlink_is_refused_in_one_line(tmp_path):
    import errno

    secret = tmp_path / "secret"
    secret.write_text("not yours to read\n")
    log = tmp_path / "job.log"
    log.symlink_to(secret)
    _write_record(id="8", log=str(log))
    kind, what, where, fix = _refusal(S.read_log, "8")
    assert (where, fix) == (str(log), "a job log is a regular file envman's job script writes; remove what is there")
    assert (kind, what) == ("UserError", f"cannot open the job log: {os.strerror(errno.ELOOP)}")


def test_a_log_of_exactly_the_tail_s_size_is_shown_whole_without_a_note(tmp_path):
    log = tmp_path / "job.log"
    _write_record(id="8", log=str(log))
    log.write_bytes(b"a" * S.LOG_TAIL)
    assert S.read_log("8")[1] == "a" * S.LOG_TAIL
    log.write_bytes(b"b" + b"a" * S.LOG_TAIL)
    assert S.read_log("8")[1] == f"[envman: the first 1 bytes of {log} are not shown]\n" + "a" * S.LOG_TAIL


def test_a_log_growing_while_it_is_read_gives_at_most_the_tail(tmp_path, monkeypatch):
    log = tmp_path / "job.log"
    _write_record(id="8", log=str(log))
    log.write_bytes(b"a" * (S.LOG_TAIL + 10) + b"b" * 1000)  # the last 1000 bytes came after the size was read
    real = os.fstat

    def fstat(fd):
        st = real(fd)
        return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid,
                               st.st_size - 1000, st.st_atime, st.st_mtime, st.st_ctime))

    monkeypatch.setattr(os, "fstat", fstat)
    text = S.read_log("8")[1]
    assert text == f"[envman: the first 10 bytes of {log} are not shown]\n" + "a" * S.LOG_TAIL


def test_following_a_log_larger_than_one_read_writes_each_byte_once_in_bounded_pieces(tmp_path, monkeypatch):
    """A character split between two reads is written whole; a log that ends inside one ends
    with the replacement character."""
    log = tmp_path / "job.log"
    _write_record(id="9", log=str(log))
    body = ("é" * (S.LOG_TAIL // 2) + "x" * 3 + "€" * 5).encode() + b"\xe2\x82"
    log.write_bytes(body)
    monkeypatch.setattr(S, "job_states", lambda ids, run, since=None: {"9": JobState("9", "COMPLETED", 0)})
    out: list[str] = []

    def write(text: str) -> None:  # a byte written twice would never end: stop at the first excess
        out.append(text)
        assert sum(len(t.encode()) for t in out) <= len(body) + 3, "more written than the log holds"

    S.follow_log("9", write, Cluster(), interval=0, sleep=lambda s: None)
    assert "".join(out) == body.decode(errors="replace") and "".join(out).endswith("€\ufffd")
    assert len(out) >= 2 and all(len(piece.encode()) <= S.LOG_TAIL for piece in out)
    assert "\ufffd" not in "".join(out)[:-1]


SQUEUE = "41|RUNNING|None\n42|PENDING|Resources\n43|COMPLETED|None\njunk\n44\n45.0|RUNNING|x\n"


def test_parse_squeue_and_sacct_exactly():
    assert S.parse_squeue(SQUEUE) == {"41": JobState("41", "RUNNING"), "42": JobState("42", "PENDING", reason="Resources"),
                                      "43": JobState("43", "COMPLETED")}
    assert S.parse_squeue("46|RUNNING\n") == {"46": JobState("46", "RUNNING")}
    assert S.parse_squeue("47|RUNNING|none\n")["47"].reason == "none"
    assert S.parse_sacct("10||0:0\n") == {"10": JobState("10", "UNKNOWN", 0, None)}
    sacct = "3|CANCELLED by 0|0:15\n4||\n5|FAILED|x\n6|TIMEOUT|0:0\n7.batch|FAILED|1:0\n8|OK\n\n9|FAILED|2:0\n"
    assert S.parse_sacct(sacct) == {"3": JobState("3", "CANCELLED", 0, 15), "4": JobState("4", "UNKNOWN"),
                                    "5": JobState("5", "FAILED"), "6": JobState("6", "TIMEOUT", 0, None),
                                    "9": JobState("9", "FAILED", 2, None)}


def test_job_states_live_from_squeue_ended_from_sacct_then_the_completion_log(monkeypatch):
    monkeypatch.setattr(S, "_user", lambda: "me")
    assert S.job_states([], Cluster()) == {}
    live = "41|RUNNING|None\n42|PENDING|Prio\n43|COMPLETED|None\n44|SUSPENDED|None\n45|CONFIGURING|None\n" \
           "46|COMPLETING|None\n47|REQUEUED|None\n48|FAILED|None\n"
    cluster = Cluster(squeue=(0, live, ""), sacct=lambda a: (0, "43|COMPLETED|0:0\n", "") if "-X" in a else (9, "", ""))
    ids = ["41", "42", "43", "44", "45", "46", "47", "48", "49"]
    states = S.job_states(ids, cluster)
    assert {i: s.state for i, s in states.items()} == {
        "41": "RUNNING", "42": "PENDING", "43": "COMPLETED", "44": "SUSPENDED", "45": "CONFIGURING", "46": "COMPLETING",
        "47": "REQUEUED", "48": "FAILED", "49": "UNKNOWN"}
    assert states["43"].exit_code == 0 and states["42"].reason == "Prio"
    assert cluster.calls[0] == ["squeue", "--noheader", "--user=me", "--states=all", "--format=%i|%T|%r"]
    assert cluster.calls[1] == ["sacct", "-X", "--user=me", "--noheader", "--parsable2", "--format=JobID,State,ExitCode",
                                "--jobs=43,48,49"]
    assert len(cluster.calls) == 2
    no_db = Cluster(squeue=(0, "", ""), sacct=lambda a: (1, "", "disabled") if "-X" in a else (0, "43|FAILED|1:0\n", ""))
    states = S.job_states(["43"], no_db, since=86400 * 3)
    assert states["43"] == JobState("43", "FAILED", 1, None)
    import time

    start = "--starttime=" + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(86400 * 2))
    assert no_db.calls[2] == ["sacct", "--completion", "--noheader", "--parsable2", "--format=JobID,State,ExitCode",
                              "--jobs=43", start]
    nothing = Cluster(squeue=(0, "", ""), sacct=(1, "43|COMPLETED|0:0\n", "down"))  # a failed sacct's output is not believed
    assert S.job_states(["43"], nothing)["43"] == JobState("43", "UNKNOWN")
    assert _refusal(S.job_states, ["1"], Cluster(squeue=(1, "", "squeue: error: down\n"))) == (
        "EnvmanError", "squeue failed: squeue: error: down", "envman jobs", "check the cluster: scontrol ping")


def test_jobs_lists_the_records_with_their_states(monkeypatch):
    monkeypatch.setattr(S, "_user", lambda: "me")
    for i, t in (("5", 1.0), ("6", 2.0), ("7", 3.0)):
        _write_record(id=i, submitted=t)
    cluster = Cluster(squeue=(0, "7|RUNNING|None\n", ""), sacct=(0, "6|COMPLETED|0:0\n", ""))
    assert [(r.id, s.state) for r, s in S.jobs(cluster)] == [("7", "RUNNING"), ("6", "COMPLETED"), ("5", "UNKNOWN")]
    assert any(a.startswith("--starttime=") for a in cluster.calls[1])
    assert [(r.id, s.state) for r, s in S.jobs(Cluster(squeue=(0, "7|RUNNING|None\n", "")), limit=2)] == [
        ("7", "RUNNING"), ("6", "UNKNOWN")]
    assert [(r.id, s.state) for r, s in S.jobs(cluster, limit=None)] == [("7", "RUNNING"), ("6", "COMPLETED"), ("5", "UNKNOWN")]
    monkeypatch.setattr(S, "job_states", lambda ids, run, since=None: {})
    assert [s for _, s in S.jobs(cluster)] == [JobState("7", "UNKNOWN"), JobState("6", "UNKNOWN"), JobState("5", "UNKNOWN")]


def test_follow_log_writes_each_new_piece_once_and_returns_the_final_state(tmp_path, monkeypatch):
    log = tmp_path / "job.log"
    _write_record(id="9", log=str(log), submitted=86400 * 5)
    seen: list[tuple] = []
    states = iter(["RUNNING", "RUNNING", "RUNNING", "COMPLETED", "COMPLETED"])

    def fake_states(ids, run, since=None):
        seen.append((tuple(ids), since))
        return {"9": JobState("9", next(states), 0)}

    monkeypatch.setattr(S, "job_states", fake_states)
    pieces = iter([b"one \xff\n", b"two\n"])
    out: list[str] = []
    sleeps: list[float] = []

    def sleep(seconds):
        sleeps.append(seconds)
        piece = next(pieces, None)
        if piece:
            with open(log, "ab") as fh:
                fh.write(piece)

    final = S.follow_log("9", out.append, Cluster(), interval=0.25, sleep=sleep)
    assert out == ["one \ufffd\n", "two\n"] and final == JobState("9", "COMPLETED", 0)
    assert sleeps == [0.25, 0.25] and all(s == (("9",), 86400 * 5) for s in seen)


# --------------------------------------------------------------------------- building a job from a project


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A trusted project (``make(body)`` writes and trusts its envman.toml) and a clean user config."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ENVMAN_MATRIX", raising=False)
    root = tmp_path / "proj"
    root.mkdir()

    def make(body: str, config: str = "", trust: bool = True) -> Path:
        (root / "envman.toml").write_text(body)
        cfg = tmp_path / "config"
        cfg.mkdir(exist_ok=True)
        (cfg / "config.toml").write_text(config)
        if trust:
            from envman.project.file import load_project
            from envman.project.trust import trust as record

            p = load_project(root / "envman.toml")
            record(p.real_file, p.digest)
        return root

    return make


STACK = 'stack = "torch-2.4-cuda12.4"\nname = "demo"\ncommand = ["python", "t.py"]\n'


def _request(root: Path, **kw) -> "S.SubmitRequest":
    return S.SubmitRequest(target=str(root), resources=kw.pop("resources", Resources(gpus=-1)), **kw)


def test_a_job_is_the_project_s_run_settings(project, tmp_path):
    root = project(STACK + 'gpus = 2\nmounts = ["./data:/data:ro"]\n[environment]\nK = "v 1"\n')
    (root / "data").mkdir()
    spec = S.build_spec(_request(root, runtime="apptainer"), envman_argv=["py", "-m", "envman"])
    from envman.matrix.source import MatrixSource
    from envman.paths import config_dir, state_dir
    from envman.project.file import load_project
    from envman.project.image import home_dir
    from envman.state import stable_ref

    stack = MatrixSource().resolve("torch-2.4-cuda12.4").name
    home = home_dir(load_project(root / "envman.toml"))
    assert spec == JobSpec(
        project="demo", root=str(root.resolve()), stack=stack, image=f"docker-daemon:{stable_ref(stack)}", runtime="apptainer",
        resources=Resources(gpus=2), envman=("py", "-m", "envman"), command=("python", "t.py"), matrix_files=(),
        environment=(("K", "v 1"),), mounts=(Mount(str(root / "data"), "/data", True),), home=str(home.resolve()),
        state_dir=str(state_dir().absolute()), config_dir=str(config_dir().absolute()), matrix_env="",
        env_file=spec.env_file, job_env=tuple((k, v) for k, v in spec.job_env))
    # What the job script needs for itself (it starts with --export=NONE): the submitter's values.
    assert dict(spec.job_env).get("PATH") == os.environ.get("PATH", os.defpath)
    assert {k for k, _ in spec.job_env} <= set(S.JOB_ENV_NAMES)
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    env_file = Path(spec.env_file)
    assert env_file.parent == S.slurm_dir().absolute() / "env" and env_file.name.startswith("demo-")
    assert env_file.name.endswith(f"-{os.getpid()}.env")


def test_the_job_takes_the_config_s_runtime_and_partition_unless_given(project):
    root = project(STACK, config='[slurm]\nruntime = "pyxis"\npartition = "long"\n')
    spec = S.build_spec(_request(root, resources=Resources(gpus=1)))
    assert (spec.runtime, spec.resources.partition, spec.image[:9]) == ("pyxis", "long", "dockerd:/")
    spec = S.build_spec(_request(root, runtime="charliecloud", resources=Resources(partition="short", gpus=0)))
    assert (spec.runtime, spec.resources.partition, spec.resources.gpus) == ("charliecloud", "short", 0)
    assert spec.envman[1:] == ("-m", "envman")
    spec = S.build_spec(_request(root, runtime="pyxis", image="reg.example/x:1"))
    assert spec.image == "reg.example/x:1" and spec.resources.gpus == 1  # a CUDA stack: one GPU by default


@pytest.mark.parametrize("gpus_line,count", [("", 1), ("gpus = 0\n", 0), ("gpus = \"none\"\n", 0), ("gpus = 3\n", 3), ('gpus = "all"\n', 1), ('gpus = "device=0,2"\n', 2)])
def test_without_gpus_given_the_job_asks_slurm_for_the_project_s(project, gpus_line, count):
    root = project(STACK + gpus_line)
    assert S.build_spec(_request(root)).resources.gpus == count




def test_what_a_job_cannot_be_is_refused_before_anything_is_written(project, tmp_path):
    cpu = 'stack = "torch-2.4-cpu"\nname = "demo"\ncommand = ["x"]\n'
    root = project(cpu)
    stack = S.build_spec(_request(root, resources=Resources(gpus=0))).stack
    assert _refusal(S.build_spec, _request(root, resources=Resources(gpus=1))) == (
        "UserError", f"{stack} is a CPU stack: it cannot use GPUs", "--gpus", "submit with --gpus 0")
    assert S.build_spec(_request(root)).resources.gpus == 0  # a CPU stack asks for none
    root = project(STACK + 'requirements = ["numpy==2.0.0"]\n')
    for runtime in ("pyxis", "apptainer", "charliecloud"):
        assert _refusal(S.build_spec, _request(root, runtime=runtime)) == (
            "UserError", "project demo has its own image (requirements/apt), which only the docker runtime builds on the node",
            "envman submit", "pass --image with the project image pushed to a registry, or use docker/podman")
        assert S.build_spec(_request(root, runtime=runtime, image="reg.example/demo:1")).image == "reg.example/demo:1"
    for runtime in ("docker", "podman"):
        assert S.build_spec(_request(root, runtime=runtime)).runtime == runtime
        assert _refusal(S.build_spec, _request(root, runtime=runtime, image="x:1"))[1].startswith("--image applies to")
    state = _files(tmp_path / "state")
    assert all(not f.startswith("slurm/") for f in state), state


def test_an_untrusted_project_is_never_made_a_job(project, tmp_path):
    root = project(STACK + '[environment]\nK = "v"\n', trust=False)
    kind, what, where, fix = _refusal(S.build_spec, _request(root, runtime="pyxis", image="x:1"))
    assert kind == "UserError" and "it is not trusted" in what and where == str(root / "envman.toml")
    assert fix.startswith("read it, then trust it: envman project trust ")
    assert not (tmp_path / "state" / "homes").exists()


def test_the_node_check_is_envman_run_s_gpu_preflight(project, monkeypatch):
    from envman.host import HostFacts, HostGpu
    from envman.run import command, prepare

    root = project(STACK)
    from envman.matrix.source import MatrixSource

    matrix = MatrixSource()
    monkeypatch.setenv("SLURM_JOB_GPUS", "1")
    assert S.node_check(str(root), False, matrix) == []  # a CPU job checks nothing
    ok = HostFacts("nvml", driver="570.86.10", gpus=(HostGpu(0, "A", compute_cap="8.0"), HostGpu(1, "B", compute_cap="8.0")),
                   warnings=("a warning",))
    monkeypatch.setattr(command, "detect_host", lambda m: ok if m is matrix else pytest.fail("not the job's matrix"))
    assert S.node_check(str(root), True, matrix) == ["a warning"]
    old = replace(ok, driver="450.36.06")
    monkeypatch.setattr(command, "detect_host", lambda m: old)
    with pytest.raises(prepare.PreflightError) as e:
        S.node_check(str(root), True, matrix)
    assert "450.36.06" in str(e.value)
    monkeypatch.setenv("SLURM_JOB_GPUS", "7")  # not on this node
    monkeypatch.setattr(command, "detect_host", lambda m: ok)
    with pytest.raises(prepare.PreflightError):
        S.node_check(str(root), True, matrix)


def test_slurm_s_commands_run_as_argv_lists_and_fail_as_one_line(monkeypatch):
    import shutil

    calls = []
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert _refusal(S._run, ["sinfo", "-s"]) == (
        "EnvmanError", "sinfo is not installed here", "envman",
        "run envman submit/jobs/logs on a Slurm login node (Slurm's client commands on PATH)")
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/" + name)

    def fake_run(argv, **kw):
        calls.append((argv, kw))
        if argv[0] == "slow":
            raise subprocess.TimeoutExpired(argv, 60)
        return _cp(argv, 0, "out")

    monkeypatch.setattr(subprocess, "run", fake_run)
    assert S._run(["sinfo", "-s"]).stdout == "out"
    assert calls[0] == (["sinfo", "-s"], {"capture_output": True, "text": True, "timeout": 60, "stdin": subprocess.DEVNULL})
    assert _refusal(S._run, ["slow"]) == ("EnvmanError", "slow did not answer within 60 s", "envman",
                                         "check the cluster: scontrol ping")


def test_the_slurm_config_table(tmp_path):
    cfg = tmp_path / "c.toml"
    for text, want in (("", S.SlurmConfig()), ('[slurm]\nruntime = " Pyxis "\n', S.SlurmConfig("pyxis")),
                       ('[slurm]\npartition = "a,b"\n', S.SlurmConfig("docker", "a,b"))):
        cfg.write_text(text)
        assert S.load_slurm_config(cfg) == want
    for text, what, key in (('[slurm]\nruntime = 1\n', "key slurm.runtime: expected " + RUNTIME_FIX, "runtime"),
                            ('[slurm]\npartition = ["a"]\n', "key slurm.partition: expected a partition name", "partition")):
        cfg.write_text(text)
        assert _refusal(S.load_slurm_config, cfg) == ("UserError", what, f"{cfg}: [slurm].{key}",
                                                      f'write {key} = "..." in [slurm]')
    cfg.write_text('[slurm]\nruntime = "rkt"\n')
    assert _refusal(S.load_slurm_config, cfg) == ("UserError", "unknown runtime 'rkt'", f"{cfg}: [slurm].runtime", RUNTIME_FIX)
    cfg.write_text('[slurm]\npartition = "a b"\n')
    assert _refusal(S.load_slurm_config, cfg) == ("UserError", "'a b' is not a partition name", f"{cfg}: [slurm].partition",
                                                  PARTITION_FIX)


def test_charliecloud_keeps_one_converted_copy_per_image():
    assert S.charliecloud_image_dir("/s", "reg.example:5000/a/b:1") == "/s/charliecloud/reg.example_5000_a_b_1"


def test_no_jobs_and_the_log_poll_interval(monkeypatch):
    assert S.jobs(Cluster()) == []
    _write_record(id="9", log="/nonexistent/job.log")
    monkeypatch.setattr(S, "job_states", lambda ids, run, since=None: {"9": JobState("9", next(states))})
    states = iter(["RUNNING", "COMPLETED"])
    slept: list[float] = []
    assert S.follow_log("9", lambda s: None, Cluster(), sleep=slept.append).state == "COMPLETED"
    assert slept == [1.0]


@pytest.mark.parametrize("name", ["X", "gpuX", "a100-XL", "x*y"])
def test_a_partition_keeps_every_character_but_sinfo_s_default_star(name):
    cluster = Cluster(sinfo=(0, f"debug\n{name}*\n", ""))  # sinfo marks the default partition with a trailing *
    S.check_partition_exists(name, cluster)
    S.check_partition_exists("debug", cluster)


@pytest.mark.parametrize("path", ["/data/X", "/w/XX-set", "/w/a b", "/w/Ü"])
@pytest.mark.parametrize("runtime", ["apptainer", "charliecloud"])
def test_a_bind_path_without_a_comma_colon_or_line_break_passes_as_it_is(path, runtime):
    from envman.cluster import batch

    assert batch._check_bind_path(path, runtime) == path


@pytest.mark.parametrize("given,expected", [
    ({}, {"PATH": os.defpath, "USER": "<pwd>"}),
    ({"USER": ""}, {"PATH": os.defpath, "USER": "<pwd>"}),
    ({"PATH": "/p", "HOME": "/h", "USER": "u", "DOCKER_HOST": "unix:///d.sock", "OTHER": "x"},
     {"PATH": "/p", "HOME": "/h", "USER": "u", "DOCKER_HOST": "unix:///d.sock"}),
    ({"PATH": "", "HOME": "/h"}, {"PATH": os.defpath, "HOME": "/h", "USER": "<pwd>"}),
])
def test_the_job_s_own_environment_is_the_submitter_s_few_names_with_defaults(monkeypatch, given, expected):
    import pwd

    for name in (*S.JOB_ENV_NAMES, "OTHER"):
        monkeypatch.delenv(name, raising=False)
    for k, v in given.items():
        monkeypatch.setenv(k, v)
    me = pwd.getpwuid(os.getuid()).pw_name
    want = {k: (me if v == "<pwd>" else v) for k, v in expected.items()}
    assert S._job_env() == tuple((k, want[k]) for k in S.JOB_ENV_NAMES if k in want)


def test_the_config_s_run_values_reach_a_job_only_from_a_trusted_project(project, capsys):
    config = '[run]\nmounts = []\n[run.environment]\nTOKEN = "t"\n'
    plain = 'stack = "torch-2.4-cuda12.4"\nname = "demo"\n'
    root = project(plain, config=config, trust=False)  # nothing in it needs trust: it is submitted
    spec = S.build_spec(_request(root, runtime="apptainer", command=("python", "t.py")))
    assert "TOKEN" not in dict(spec.environment)
    assert capsys.readouterr().err == (
        f"envman: warning: your config's [run] environment (TOKEN) not given to {root / 'envman.toml'}: it is not trusted "
        f"(read it, then trust it to pass them: envman project trust {root / 'envman.toml'})\n")
    root = project(plain, config=config)
    spec = S.build_spec(_request(root, runtime="apptainer", command=("python", "t.py")))
    assert dict(spec.environment)["TOKEN"] == "t" and capsys.readouterr().err == ""


@pytest.mark.parametrize("runtime", S.SCRIPT_RUNTIMES)
def test_a_project_without_a_network_is_refused_by_the_runtimes_that_share_the_node_s(project, runtime):
    root = project(STACK + 'network = "none"\n')
    assert _refusal(S.build_spec, _request(root, runtime=runtime, image="x:1")) == (
        "UserError", f'the project asks for no network (network = "none"), which runtime {runtime} does not give a job',
        "envman submit", 'submit with --runtime docker or podman (envman run on the node gives none), or drop '
        'network = "none"')
    assert S.build_spec(_request(root, runtime="docker")).runtime == "docker"


def test_the_job_names_its_matrix_files_absolutely_and_its_env_file_by_the_millisecond(project, tmp_path, monkeypatch):
    root = project(STACK)
    extra = tmp_path / "extra.toml"
    extra.write_text("schema = 1\nkind = \"gpus\"\n")
    mine = tmp_path / "mine.toml"
    mine.write_text("schema = 1\nkind = \"gpus\"\n")
    monkeypatch.setenv("ENVMAN_MATRIX", str(mine))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(S.time, "time", lambda: 1234.5678)
    spec = S.build_spec(_request(root, runtime="apptainer", matrix_files=("extra.toml",)))
    assert spec.matrix_files == (str(extra),)
    assert spec.matrix_env == str(mine)
    assert spec.env_file == str(S.slurm_dir().absolute() / "env" / f"demo-1234567-{os.getpid()}.env")


def test_a_cpu_job_gets_none_of_the_project_s_gpu_variables_and_a_gpu_job_all(project):
    root = project(STACK + '[environment]\nNVIDIA_DRIVER_CAPABILITIES = "compute"\nCUDA_VISIBLE_DEVICES = "0"\nK = "v"\n')
    cpu = S.build_spec(_request(root, runtime="apptainer", resources=Resources(gpus=0)))
    assert dict(cpu.environment) == {"K": "v"}
    gpu = S.build_spec(_request(root, runtime="apptainer", resources=Resources(gpus=1)))
    assert dict(gpu.environment) == {"NVIDIA_DRIVER_CAPABILITIES": "compute", "CUDA_VISIBLE_DEVICES": "0", "K": "v"}
