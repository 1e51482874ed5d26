"""Every exporter holds its file to ``envman run``'s rules: the hardening options of
``docker_argv`` (derived from it, so a new option fails here until every exporter carries it or
says why it cannot), the GPU-variable rule, the project-root rule and real mount paths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from envman.cluster.export import ExportInput, compose, compose_service, devcontainer, k8s_job, to_yaml
from envman.errors import UserError
from envman.matrix.load import load_matrix
from envman.project.file import GpuRequest, Mount
from envman.run.plan import GPU_SELECTION_VARS, RunPlan, docker_argv
from envman.stack.resolve import resolve

DIGEST_IMAGE = "reg.example:5000/envman/x@sha256:" + "a" * 64
EXPORTERS = ("k8s", "devcontainer", "compose")


def _input(cpu: bool = True, **kw: Any) -> ExportInput:
    base: dict[str, Any] = dict(
        project="p", root=Path("/srv/p"), stack=resolve(load_matrix(), "torch-2.4-cpu" if cpu else "torch-2.4-cuda12.4"),
        image=DIGEST_IMAGE, command=("python", "t.py"), environment=(("A", "1"),), mounts=(), ports=(),
        gpus=None if cpu else GpuRequest("count", count=1), shm_size="8g")
    base.update(kw)
    return ExportInput(**base)


def _docs(x: ExportInput) -> dict[str, dict[str, Any]]:
    """Each exporter's document, as its tool reads it."""
    job, _ = k8s_job(x, gpus=0 if x.gpus is None else 1)
    dev, _ = devcontainer(x, "/state/exports/p.env")
    svc = yaml.safe_load(to_yaml(compose({"p": compose_service(x, uid=1000, gid=1000, home="/h")})))["services"]["p"]
    return {"k8s": yaml.safe_load(to_yaml(job)), "devcontainer": json.loads(json.dumps(dev)), "compose": svc}


# --------------------------------------------------------------------------- envman run's rules, from its argv


def _pairs(argv: list[str]) -> set[tuple[str, ...]]:
    """``docker run`` options as (flag,) or (flag, value) pairs."""
    out = set()
    words = argv[2:]
    for i, w in enumerate(words):
        if w.startswith("--"):
            nxt = words[i + 1] if i + 1 < len(words) else None
            out.add((w,) if nxt is None or nxt.startswith("--") else (w, nxt))
    return out


#: What envman run's argv holds for identity rather than hardening (each exporter writes its own).
NOT_HARDENING = {("--label",), ("--workdir",), ("--env", "HOME=/home/envman")}


def run_rules() -> set[tuple[str, ...]]:
    """The options every CPU ``envman run`` passes whatever the project (the same in two runs that
    share nothing else): its hardening rules."""
    a = docker_argv(RunPlan(image="envman/s:latest", project="a", stack="s", root="/p", home="/h", uid=1000, gid=1000))
    b = docker_argv(RunPlan(image="other/t:1", project="b", stack="t", root="/q", home="/g", uid=2000, gid=3000,
                            shm_size="1g"))
    return {r for r in _pairs(a) & _pairs(b)
            if r not in NOT_HARDENING and (r[0],) not in NOT_HARDENING}


Check = Callable[[dict[str, Any]], bool]


def _env_k8s(doc: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in doc["spec"]["template"]["spec"]["containers"][0]["env"]}


def _k8s_sc(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["template"]["spec"]["containers"][0]["securityContext"]


def _args(doc: dict[str, Any], *words: str) -> bool:
    a = doc["runArgs"]
    return any(a[i:i + len(words)] == list(words) for i in range(len(a)))


#: How each exporter carries each rule of envman run, or (a string) why its format cannot.
RULES: dict[tuple[str, ...], dict[str, Check | str]] = {
    ("--rm",): {
        "k8s": "a Job's pod is kept after it ends for its logs (the cluster's TTL controller removes it)",
        "devcontainer": "the Dev Containers tools stop and restart the same container between sessions",
        "compose": "docker compose keeps a service's container until docker compose down",
    },
    ("--pull", "never"): {
        "k8s": lambda d: d["spec"]["template"]["spec"]["containers"][0]["image"].endswith("@sha256:" + "a" * 64),
        "devcontainer": lambda d: _args(d, "--pull", "never"),
        "compose": lambda d: d.get("pull_policy") == "never",
    },
    ("--init",): {
        "k8s": "a pod spec has no init-process option",
        "devcontainer": lambda d: _args(d, "--init"),
        "compose": lambda d: d.get("init") is True,
    },
    ("--cap-drop", "ALL"): {
        "k8s": lambda d: _k8s_sc(d)["capabilities"]["drop"] == ["ALL"],
        "devcontainer": lambda d: _args(d, "--cap-drop", "ALL"),
        "compose": lambda d: d.get("cap_drop") == ["ALL"],
    },
    ("--security-opt", "no-new-privileges"): {
        "k8s": lambda d: _k8s_sc(d)["allowPrivilegeEscalation"] is False,
        "devcontainer": lambda d: _args(d, "--security-opt", "no-new-privileges"),
        "compose": lambda d: d.get("security_opt") == ["no-new-privileges"],
    },
    ("--env", "NVIDIA_VISIBLE_DEVICES=void"): {
        "k8s": lambda d: _env_k8s(d).get("NVIDIA_VISIBLE_DEVICES") == "void",
        "devcontainer": lambda d: d["containerEnv"].get("NVIDIA_VISIBLE_DEVICES") == "void",
        "compose": lambda d: d["environment"].get("NVIDIA_VISIBLE_DEVICES") == "void",
    },
}


def test_the_rules_are_derived_from_envman_runs_argv():
    rules = run_rules()
    assert ("--cap-drop", "ALL") in rules and ("--env", "NVIDIA_VISIBLE_DEVICES=void") in rules
    assert set(RULES) == rules, ("envman run's hardening changed: give every exporter the new rule in RULES "
                                 f"(and in envman.cluster.export): {sorted(rules ^ set(RULES))}")


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("rule", sorted(run_rules()), ids=" ".join)
def test_every_exporter_carries_every_hardening_rule_of_envman_run(exporter, rule):
    how = RULES.get(rule, {}).get(exporter)
    assert how is not None, f"{exporter} has no entry for envman run's {' '.join(rule)}"
    if isinstance(how, str):
        assert how  # a reason its format cannot say it
        return
    assert how(_docs(_input(cpu=True))[exporter]), f"{exporter} lacks envman run's {' '.join(rule)}"


# --------------------------------------------------------------------------- GPU variables


GPU_VARS = ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", *GPU_SELECTION_VARS)


def _names(exporter: str, doc: dict[str, Any]) -> dict[str, Any]:
    if exporter == "k8s":
        return _env_k8s(doc)
    return dict(doc["containerEnv" if exporter == "devcontainer" else "environment"])


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("cpu", [True, False])
def test_exports_drop_the_projects_gpu_variables_as_envman_run_does(exporter, cpu):
    hostile = tuple((k, "all") for k in GPU_VARS) + (("A", "1"),)
    env = _names(exporter, _docs(_input(cpu=cpu, environment=hostile))[exporter])
    assert "A" in env or exporter == "devcontainer"  # the Dev Container reads values from its env file
    if cpu:
        assert {k for k in GPU_VARS if k in env} <= {"NVIDIA_VISIBLE_DEVICES"}
        assert env["NVIDIA_VISIBLE_DEVICES"] == "void"
    else:
        assert "NVIDIA_VISIBLE_DEVICES" not in env  # the GPU request decides the devices


def test_the_dev_containers_env_file_is_needed_only_for_what_survives_the_rule():
    x = _input(environment=(("NVIDIA_VISIBLE_DEVICES", "all"),))
    doc, _ = devcontainer(x, None)  # nothing left to pass: no env file needed
    assert "--env-file" not in doc["runArgs"]


# --------------------------------------------------------------------------- the project root and mounts


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    return h


def _export(exporter: str, target: str, out: Path) -> None:
    from envman.cli import export as cli

    if exporter == "k8s":
        cli.k8s(target, gpus=None, image=DIGEST_IMAGE, runtime_class=None, registry=None, uid=1000, gid=1000,
                push=False, git=None, git_ref=None, output=str(out / "job.yaml"), force=True)
    elif exporter == "devcontainer":
        cli.devcontainer_cmd(target, output=str(out / "dc"), force=True)
    else:
        cli.compose_cmd([target], output=str(out / "compose.yaml"), force=True)


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("where", ["", ".config/autostart", ".ssh"])
def test_every_exporter_refuses_a_protected_project_root_as_envman_run_does(exporter, where, home, tmp_path):
    root = home / where if where else home
    root.mkdir(parents=True, exist_ok=True)
    (root / "envman.toml").write_text('name = "homeproj"\nstack = "torch-2.4-cpu"\ngpus = "none"\n')
    with pytest.raises(UserError, match="cannot be mounted at /workspace"):
        _export(exporter, str(root), tmp_path)
    assert not list(tmp_path.glob("job.yaml")) + list(tmp_path.glob("compose.yaml")) + list(tmp_path.glob("dc"))


@pytest.mark.parametrize("exporter", ["devcontainer", "compose"])
def test_exports_name_the_real_path_of_a_mount_not_the_link(exporter, tmp_path):
    real = tmp_path / "datasets" / "imagenet"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "datasets")
    x = _input(mounts=(Mount(str(tmp_path / "link" / "imagenet"), "/data"),))
    doc = _docs(x)[exporter]
    text = json.dumps(doc)
    assert str(real) in text and str(tmp_path / "link") not in text


@pytest.mark.parametrize("exporter", ["devcontainer", "compose"])
def test_a_link_to_a_protected_folder_is_refused_by_every_exporter(exporter, home, tmp_path):
    (home / ".ssh").mkdir()
    (tmp_path / "data").symlink_to(home / ".ssh")
    with pytest.raises(UserError, match="refused"):
        _docs(_input(mounts=(Mount(str(tmp_path / "data"), "/data"),)))[exporter]


# --------------------------------------------------------------------------- the Kubernetes Job asks for nothing more


@pytest.mark.parametrize("cpu", [True, False])
def test_the_job_gets_no_service_account_token_and_no_service_links(cpu):
    pod = _docs(_input(cpu=cpu))["k8s"]["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and pod["enableServiceLinks"] is False


# --------------------------------------------------------------------------- networks


def _network_outcome(exporter: str, network: str) -> str:
    """What ``exporter`` gives a project asking for ``network``: the network its container joins, or
    ``refused``."""
    x = _input(cpu=True, network=network)
    try:
        if exporter == "k8s":
            k8s_job(x, gpus=0)
            return "the cluster's"
        if exporter == "devcontainer":
            dev, _ = devcontainer(x, "/state/exports/p.env", uid=1000)
            a = dev["runArgs"]
            name = a[a.index("--network") + 1]
            assert a.count("--network") == 1
            if name != "none":  # made before the container starts, with envman's labels
                from envman.run.network import create_command

                assert dev["initializeCommand"] == create_command(1000, "p", "/srv/p")
            else:
                assert "initializeCommand" not in dev
            return name
        svc = compose_service(x, uid=1000, gid=1000, home="/h")
        return svc.get("network_mode", "the compose project's")
    except UserError as exc:
        assert "\n" not in str(exc)
        return "refused"


#: (exporter, the project's network) -> what the exported container joins: never the engine's
#: default bridge; no network exactly when the project asks for none, or a refusal.
NETWORKS = {
    ("k8s", "project"): "the cluster's", ("k8s", "none"): "refused",
    ("devcontainer", "project"): "envman-1000-p-" + __import__("hashlib").sha256(b"/srv/p").hexdigest()[:12],
    ("devcontainer", "none"): "none",
    ("compose", "project"): "the compose project's", ("compose", "none"): "none",
}


@pytest.mark.parametrize("case", sorted(NETWORKS), ids=" ".join)
def test_every_exporter_gives_the_project_s_network_or_none(case):
    assert _network_outcome(*case) == NETWORKS[case]


def test_the_devcontainer_network_is_envman_run_s():
    from envman.run.plan import RunPlan

    dev, _ = devcontainer(_input(), "/state/exports/p.env", uid=1000)
    run = RunPlan(image="i", project="p", stack="s", root="/srv/p", home="/h", uid=1000, gid=1000)
    assert dev["runArgs"][dev["runArgs"].index("--network") + 1] == run.network_name
