"""``envman export``: manifests against the Kubernetes schemas (kubernetes-validate, offline), the
devcontainer and compose documents, and file writes."""

from __future__ import annotations

import json
from pathlib import Path

import os

import pytest
from hypothesis import given, settings, strategies as st
import yaml

from envman.errors import UserError
from envman.cluster.export import (
    ExportInput, compose, compose_service, devcontainer, k8s_job, quantity, to_yaml, write_files,
)
from envman.cluster.gfd import gfd_node_terms
from envman.matrix.load import load_matrix
from envman.project.file import GpuRequest, Mount, Port
from envman.stack.resolve import resolve
from tests.support.cli import run_envman

DIGEST = "sha256:" + "ab" * 32


# --------------------------------------------------------------------------- the Job


def _input(stack_name: str = "torch-2.4-cuda12.4", **kw) -> ExportInput:
    stack = resolve(load_matrix(), stack_name)
    base = dict(project="my_proj.v2", root=Path("/srv/p"), stack=stack, image=f"reg.example:5000/envman/x@{DIGEST}",
                command=("python", "train.py", "--x", "$HOME"), environment=(("WANDB_MODE", "offline"), ("HF_TOKEN", "hf_x")),
                mounts=(Mount("/data", "/data", True),), ports=(Port(8888, 8888),), gpus=GpuRequest("count", count=2),
                shm_size="8g")
    base.update(kw)
    return ExportInput(**base)


def _validate(doc: dict) -> None:
    import kubernetes_validate

    kubernetes_validate.validate(doc, "1.29.0", strict=True)


def test_job_validates_against_the_kubernetes_schema_and_has_the_run_settings():
    job, secrets = k8s_job(_input(), gpus=2, runtime_class="nvidia", uid=1234, gid=1234)
    parsed = yaml.safe_load(to_yaml(job))
    assert parsed == job
    _validate(parsed)
    pod = parsed["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["image"].endswith("@" + DIGEST)
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert pod["runtimeClassName"] == "nvidia"
    # the entrypoint stays; every $ is doubled, which the kubelet reads back as one
    assert c["args"] == ["python", "train.py", "--x", "$$HOME"] and "command" not in c
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True}
    assert pod["securityContext"]["runAsUser"] == 1234 and pod["securityContext"]["runAsNonRoot"]
    shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "8Gi"}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    env = {e["name"]: e for e in c["env"]}
    for name in ("WANDB_MODE", "HF_TOKEN"):  # every variable, whatever its name, by reference
        assert env[name] == {"name": name, "valueFrom": {"secretKeyRef": {"name": "my-proj-v2-env", "key": name}}}
    assert "hf_x" not in to_yaml(job) and "offline" not in to_yaml(job) and secrets == ["WANDB_MODE", "HF_TOKEN"]
    assert parsed["metadata"]["name"] == "my-proj-v2"
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": t} for t in gfd_node_terms(_input().stack)]


def test_job_without_gpus_and_on_a_cpu_stack_validates_and_asks_for_no_gpu_node():
    for x, n in ((_input(), 0), (_input("torch-2.4-cpu", gpus=None), 0)):
        job, _ = k8s_job(x, gpus=n)
        _validate(yaml.safe_load(to_yaml(job)))
        pod = job["spec"]["template"]["spec"]
        assert "affinity" not in pod and "resources" not in pod["containers"][0] and "runtimeClassName" not in pod


@pytest.mark.parametrize("kw,match", [
    (dict(image="reg.example/envman/x:latest"), "not pinned by digest"),
    (dict(uid=0), "non-root"),
    (dict(runtime_class="Nvidia Runtime"), "RuntimeClass"),
    (dict(runtime_class="a;b"), "RuntimeClass"),
])
def test_job_refuses_bad_input(kw, match):
    kw = dict(kw)  # the parameter's dict is shared: a second run in one process must see it whole
    image = kw.pop("image", None)
    x = _input(image=image) if image else _input()
    with pytest.raises(UserError, match=match):
        k8s_job(x, gpus=1, **kw)


def test_job_refuses_gpus_on_a_cpu_stack():
    with pytest.raises(UserError, match="CPU build"):
        k8s_job(_input("torch-2.4-cpu", gpus=None), gpus=1)


@pytest.mark.parametrize("size,q", [("8g", "8Gi"), ("512m", "512Mi"), ("1536m", "1536Mi"), ("100", "100"), ("2t", "2Ti")])
def test_shm_quantities(size, q):
    assert quantity(size) == q


def test_hostile_values_stay_values_in_yaml():
    x = _input(project="p", command=("sh", "-c", "echo 'a'\nkey: injected # x", "- item"),
               environment=(("NOTE", 'x"\n  injected: true\\'),))
    job, _ = k8s_job(x, gpus=1)
    parsed = yaml.safe_load(to_yaml(job))
    assert parsed == job
    _validate(parsed)


# --------------------------------------------------------------------------- devcontainer and compose


def test_devcontainer_document():
    doc, dockerfile = devcontainer(_input(image="envman/torch-2.4.1-cuda12.4-py3.10:latest", gpus=GpuRequest("all")),
                                   "/state/exports/p.env")
    assert doc["workspaceFolder"] == "/workspace" and "target=/workspace" in doc["workspaceMount"]
    assert doc["remoteUser"] == "envman" and doc["updateRemoteUserUID"] is True
    assert doc["hostRequirements"] == {"gpu": True}
    assert doc["runArgs"][doc["runArgs"].index("--gpus") + 1] == "all"
    assert "no-new-privileges" in doc["runArgs"] and "--privileged" not in doc["runArgs"]
    assert "HF_TOKEN" not in doc["containerEnv"] and "hf_x" not in json.dumps(doc)
    assert doc["runArgs"][doc["runArgs"].index("--env-file") + 1] == "/state/exports/p.env"
    assert dockerfile.splitlines()[2] == "FROM envman/torch-2.4.1-cuda12.4-py3.10:latest"
    cpu, _ = devcontainer(_input("torch-2.4-cpu", gpus=None), "/e")
    assert cpu["hostRequirements"] == {"gpu": False} and "--gpus" not in cpu["runArgs"]


def test_compose_services_escape_dollars_and_reserve_gpus():
    a = compose_service(_input(project="a", environment=(("PRICE", "5$"), ("DB_PASSWORD", "pw"))), uid=1000, gid=1000,
                        home="/h/a")
    b = compose_service(_input("torch-2.4-cpu", project="b", gpus=None, command=(), environment=()), uid=1000, gid=1000,
                        home="/h/b")
    doc = yaml.safe_load(to_yaml(compose({"a": a, "b": b})))
    sa, sb = doc["services"]["a"], doc["services"]["b"]
    assert sa["environment"]["PRICE"] == "${ENVMAN_ENV_PRICE}" and "pw" not in str(sa)
    assert sa["environment"]["DB_PASSWORD"] == "${ENVMAN_ENV_DB_PASSWORD}"
    assert sa["command"] == ["python", "train.py", "--x", "$$HOME"]
    assert sa["deploy"]["resources"]["reservations"]["devices"] == [{"driver": "nvidia", "capabilities": ["gpu"], "count": 2}]
    assert sa["ports"] == ["127.0.0.1:8888:8888"] and sa["user"] == "1000:1000"
    assert "deploy" not in sb and "command" not in sb


# --------------------------------------------------------------------------- writing files


def test_write_refuses_to_overwrite_without_force(tmp_path, capsys):
    f = tmp_path / "job.yaml"
    write_files({f: "one\n"}, force=False)
    with pytest.raises(UserError, match="exists.*--force"):
        write_files({f: "two\n"}, force=False)
    assert f.read_text() == "one\n"
    write_files({f: "two\n"}, force=True)
    assert f.read_text() == "two\n"
    from envman.cli.export import write_output

    assert write_output({f: "three\n"}, "-", force=False) == [] and capsys.readouterr().out == "three\n"
    assert f.read_text() == "two\n" and [p.name for p in tmp_path.iterdir()] == ["job.yaml"]  # no temp file left


def test_write_is_all_or_nothing_when_one_file_exists(tmp_path):
    d = tmp_path / ".devcontainer"
    d.mkdir()
    (d / "Dockerfile").write_text("mine\n")
    with pytest.raises(UserError, match="Dockerfile exists"):
        write_files({d / "devcontainer.json": "{}", d / "Dockerfile": "x"}, force=False)
    assert sorted(p.name for p in d.iterdir()) == ["Dockerfile"]


def test_yaml_round_trips_json_like_documents():
    doc = {"a": [1, {"b": "x: y", "c": []}, ["p"]], "true": "yes", "e": {}, "s": "😀\u2028\\ud83d"}
    assert yaml.safe_load(to_yaml(doc)) == doc
    assert json.loads(json.dumps(doc)) == doc


def test_devcontainer_carries_values_its_tools_would_substitute_in_the_env_file():
    doc, _ = devcontainer(_input(environment=(("A", "${localEnv:HOME}"),)), "/e")
    assert "localEnv:HOME" not in json.dumps(doc)


def test_cli_writes_a_valid_job_and_refuses_bad_input(tmp_path):
    import os

    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "envman.toml").write_text('stack = "torch-2.4-cuda12.4"\nname = "p"\ncommand = ["python", "t.py"]\n'
                                      '[environment]\nGH_TOKEN = "ghp_secret"\n')
    env = {**os.environ, "ENVMAN_CONFIG_DIR": str(tmp_path / "cfg"), "ENVMAN_STATE_DIR": str(tmp_path / "state")}
    image = f"reg.example:5000/envman/x@{DIGEST}"

    def run(*args):
        return run_envman(["export", "k8s", str(proj), *args], env=env, cwd=tmp_path)

    r = run("--image", image, "--gpus", "1", "--runtime-class", "nvidia", "-o", "-")
    # a file new to this user, asking for a command and variables, is refused until trusted
    assert r.returncode == 2 and "not trusted" in r.stderr and "envman project trust" in r.stderr, r.stderr
    assert r.stdout == ""
    t = run_envman(["project", "trust", str(proj / "envman.toml")], env=env, cwd=tmp_path)
    assert t.returncode == 0, t.stderr
    r = run("--image", image, "--gpus", "1", "--runtime-class", "nvidia", "-o", "-")
    assert r.returncode == 0, r.stderr
    job = yaml.safe_load(r.stdout)
    _validate(job)
    assert "ghp_secret" not in r.stdout and "ghp_secret" not in r.stderr and "GH_TOKEN" in r.stderr
    env_file = r.stderr.split("--from-env-file=")[1].split()[0]
    assert Path(env_file).read_text() == "GH_TOKEN=ghp_secret\n" and os.stat(env_file).st_mode & 0o777 == 0o600
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    for args, match in ((("--image", "reg.example/x:latest"), "not pinned by digest"),
                        (("--image", image, "--runtime-class", "Bad Name"), "RuntimeClass"),
                        (("--image", image, "--uid", "0"), "non-root")):
        r = run(*args)
        assert r.returncode == 2 and match in r.stderr and r.stderr.count("\n") == 1, r.stderr
    r = run()  # nothing pushed, no registry: says how to get a digest
    assert r.returncode == 2 and "--push" in r.stderr, r.stderr


#: envman run's hardening options (``docker_argv``) and what a compose service says for each.
RUN_HARDENING = {
    ("--cap-drop", "ALL"): ("cap_drop", ["ALL"]),
    ("--security-opt", "no-new-privileges"): ("security_opt", ["no-new-privileges"]),
    ("--init",): ("init", True),
}


def test_compose_services_carry_every_hardening_option_of_envman_run():
    from envman.run.plan import RunPlan, docker_argv

    argv = docker_argv(RunPlan(image="envman/s:latest", project="demo", stack="s", root="/p", home="/h",
                               uid=1000, gid=1000))
    present = [opt for opt in RUN_HARDENING if any(argv[i:i + len(opt)] == list(opt) for i in range(len(argv)))]
    assert present == list(RUN_HARDENING), "envman run's hardening changed: update RUN_HARDENING and compose_service"
    svc = yaml.safe_load(to_yaml(compose({"a": compose_service(_input(), uid=1000, gid=1000, home="/h")})))["services"]["a"]
    for opt, (key, value) in RUN_HARDENING.items():
        assert svc.get(key) == value, f"compose lacks {' '.join(opt)}"


# --------------------------------------------------------------------------- the Job's workspace and --push


def test_without_git_the_jobs_workspace_is_empty_and_says_so():
    job, _ = k8s_job(_input(), gpus=1)
    pod = job["spec"]["template"]["spec"]
    assert {"name": "workspace", "emptyDir": {}} in pod["volumes"] and "initContainers" not in pod
    assert job["metadata"]["annotations"]["envman/workspace"].startswith("empty")


def test_with_git_an_init_container_clones_the_project_at_the_ref():
    url, ref = "https://git.example.org/lab/vision.git", "0123456789abcdef0123456789abcdef01234567"
    job, _ = k8s_job(_input(), gpus=1, git=(url, ref))
    parsed = yaml.safe_load(to_yaml(job))
    _validate(parsed)
    pod = parsed["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    assert init["command"][:2] == ["/bin/sh", "-c"] and init["command"][3:] == [url, ref]
    assert url not in init["command"][2] and ref not in init["command"][2]  # arguments, never shell code
    assert init["volumeMounts"] == [{"name": "workspace", "mountPath": "/workspace"}]
    assert init["securityContext"] == pod["containers"][0]["securityContext"]
    assert parsed["metadata"]["annotations"]["envman/workspace"] == f"cloned from {url} at {ref}"


def test_the_clone_script_checks_out_the_ref(tmp_path):
    """The init container's script, run here against a local repository: the ref's tree lands in
    the workspace (the URL and ref reach git as arguments)."""
    import shutil
    import subprocess

    from envman.cluster.export import CLONE_SCRIPT

    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"], "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    (repo / "train.py").write_text("v1\n")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "one"], check=True, env=env)
    first = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, env=env,
                           capture_output=True, text=True).stdout.strip()
    (repo / "train.py").write_text("v2\n")
    subprocess.run(["git", "-C", str(repo), "commit", "-qam", "two"], check=True, env=env)
    script = CLONE_SCRIPT.replace("/workspace", str(tmp_path / "ws"))
    subprocess.run(["/bin/sh", "-c", script, str(repo), first], check=True, env=env)
    assert (tmp_path / "ws" / "train.py").read_text() == "v1\n"


@pytest.mark.parametrize("url, ref, where", [
    ("http://git.example.org/x.git", "main", "--git"),
    ("https://user:pw@git.example.org/x.git", "main", "--git"),
    ("https://git.example.org/x.git?token=abc", "main", "--git"),
    ("https://git.example.org/x.git;rm -rf /", "main", "--git"),
    ("git@github.com:x/y.git", "main", "--git"),
    ("https://git.example.org/../x", "main", "--git"),
    ("https://git.example.org/x.git", "-c core.sshCommand=evil", "--git-ref"),
    ("https://git.example.org/x.git", "--upload-pack=evil", "--git-ref"),
    ("https://git.example.org/x.git", "main..evil", "--git-ref"),
    ("https://git.example.org/x.git", "a b", "--git-ref"),
    ("https://git.example.org/x.git", "", "--git-ref"),
])
def test_git_url_and_ref_are_validated(url, ref, where):
    from envman.cluster.export import check_git

    with pytest.raises(UserError) as e:
        check_git(url, ref)
    assert e.value.where == where and "\n" not in e.value.what


def test_k8s_push_pushes_the_project_image_and_uses_its_digest(tmp_path, monkeypatch, capsys):
    """`export k8s --push` of a project with its own packages: the project image goes to the
    registry and the Job names it by digest (it used to need a push by hand)."""
    from envman.cluster import k8s as X
    from envman.images.remote import parse_registry
    from tests.support.fake_engine import FakeEngine

    eng = FakeEngine()
    eng.add_image("envman/project-demo:abcd", "sha256:" + "9" * 64)
    monkeypatch.setattr(eng, "insecure_registries", lambda: (("127.0.0.0/8",), ()))

    from tests.support.fake_engine import patch_connect

    patch_connect(monkeypatch, eng)
    monkeypatch.setattr(X, "local_run", lambda proj, stack, on_warning=None: ("sha256:" + "9" * 64, "envman/project-demo:abcd"))
    proj = type("P", (), {"needs_image": True, "name": "demo"})()
    ref = X.push_run_image(proj, None, "127.0.0.1:5000/lab")
    assert ref.startswith("127.0.0.1:5000/lab/envman/project-demo@sha256:")
    assert eng.pushed == ["127.0.0.1:5000/lab/envman/project-demo:abcd"]
    assert parse_registry("127.0.0.1:5000/lab", where="x")  # the registry the ref names
    heard: list[str] = []
    x = type("X", (), {"image": "", "stack": None})()
    monkeypatch.setattr(X, "push_run_image", lambda proj, stack, registry, on_warning=None: ref)
    monkeypatch.setattr(X, "clone_source", lambda proj, request: None)
    monkeypatch.setattr(X, "replace", lambda x, image: type("X", (), {"image": image, "stack": None})())
    with pytest.raises(Exception):  # stopped past the push: the fake input has no GPUs to count
        X.export_k8s(proj, x, X.K8sRequest(push=True, registry="127.0.0.1:5000/lab"), say=heard.append)
    assert heard == ["pushed " + ref]  # said as the push is done, before the Job is written


# --------------------------------------------------------------------------- the clone image


def test_the_clone_image_can_be_pinned_by_digest_and_only_by_digest():
    from envman.cluster.export import GIT_IMAGE

    pinned = "mirror.example/alpine/git@sha256:" + "c" * 64
    job, _ = k8s_job(_input(), gpus=0, git=("https://example.org/r.git", "main"), git_image=pinned)
    assert job["spec"]["template"]["spec"]["initContainers"][0]["image"] == pinned
    default, _ = k8s_job(_input(), gpus=0, git=("https://example.org/r.git", "main"))
    assert default["spec"]["template"]["spec"]["initContainers"][0]["image"] == GIT_IMAGE
    for bad in ("alpine/git:v2.30.2", "alpine/git:latest", "alpine/git@sha256:abc", "-x@sha256:" + "c" * 64):
        with pytest.raises(UserError, match="not pinned by digest"):
            k8s_job(_input(), gpus=0, git=("https://example.org/r.git", "main"), git_image=bad)


def test_a_gpu_job_keeps_the_project_s_gpu_variables_and_a_cpu_job_drops_them():
    """The Job's variables follow ``envman run``'s rule for the GPUs the export asks for, whatever
    the project file asked: GPU-selection and NVIDIA_* variables reach a GPU job, never a CPU one."""
    gpu_env = (("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"), ("CUDA_VISIBLE_DEVICES", "0"), ("K", "v"))
    for project_gpus in (None, GpuRequest("count", count=2)):
        x = _input(gpus=project_gpus, environment=gpu_env)
        job, secrets = k8s_job(x, gpus=1)
        assert secrets == ["NVIDIA_DRIVER_CAPABILITIES", "CUDA_VISIBLE_DEVICES", "K"]
        names = [e["name"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]]
        assert "NVIDIA_VISIBLE_DEVICES" not in names
        job, secrets = k8s_job(x, gpus=0)
        assert secrets == ["K"]
        env = job["spec"]["template"]["spec"]["containers"][0]["env"]
        assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in env


def test_a_project_without_a_network_is_refused_as_a_job_in_one_line():
    with pytest.raises(UserError) as e:
        k8s_job(_input(network="none"), gpus=1)
    assert (e.value.what, e.value.where, e.value.fix) == (
        'the project asks for no network (network = "none"), which a pod cannot be given', "envman export k8s",
        "restrict the pod with a NetworkPolicy of the cluster's, or export compose or devcontainer")


def test_the_dev_container_joins_this_user_s_project_network_or_none():
    from envman.run.plan import network_name

    def network_of(doc: dict) -> str:
        args = doc["runArgs"]
        return args[args.index("--network") + 1]

    x = _input(environment=())
    assert network_of(devcontainer(x)[0]) == network_name(os.getuid(), x.project, str(x.root))
    assert network_of(devcontainer(x, uid=4321)[0]) == network_name(4321, x.project, str(x.root))
    assert network_of(devcontainer(_input(environment=(), network="none"))[0]) == "none"


def test_a_compose_service_without_a_network_has_network_mode_none():
    svc = compose_service(_input(network="none", ports=()), uid=1000, gid=1000, home="/h")
    assert svc["network_mode"] == "none" and "networks" not in svc


def test_exports_drop_gpu_variables_exactly_when_the_project_asks_for_no_gpu():
    from envman.cluster.export import run_environment

    env = (("NVIDIA_DRIVER_CAPABILITIES", "compute"), ("CUDA_VISIBLE_DEVICES", "0"), ("K", "v"))
    assert run_environment(_input(gpus=None, environment=env)) == (("K", "v"),)
    assert run_environment(_input(gpus=GpuRequest("count", count=1), environment=env)) == env
    assert run_environment(_input(gpus=GpuRequest("count", count=1), environment=env), None) == (("K", "v"),)


@pytest.mark.parametrize("value,text", [
    ({"X": 1}, "X: 1\n"),
    ([{"Xa": 1, "b": [1, [2, 3], {}, []]}], "- Xa: 1\n  b:\n    - 1\n    -\n      - 2\n      - 3\n    - {}\n    - []\n"),
    ({"a": {"b": {"c": [{"d": 1}]}}, "e": {}, "f": []}, "a:\n  b:\n    c:\n      - d: 1\ne: {}\nf: []\n"),
    ({"~": 1, "null": 2, "y": 3}, '"~": 1\n"null": 2\n"y": 3\n'),
], ids=["capital-key", "lists-in-lists", "nested-maps", "reserved-keys"])
def test_yaml_is_written_exactly_and_reads_back_as_the_value(value, text):
    assert to_yaml(value) == text
    assert yaml.safe_load(text) == value


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=12)),
                    lambda inner: st.one_of(st.lists(inner, max_size=4),
                                            st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=4)),
                    max_leaves=20))
def test_any_document_reads_back_as_itself(value):
    if not isinstance(value, (dict, list)):
        value = {"v": value}
    assert yaml.safe_load(to_yaml(value)) == value


def test_a_local_export_names_the_image_envman_run_would_run_by_id_not_a_movable_tag(tmp_path, monkeypatch):
    """Attack (issue 35 items 2/3 carried into exports): ``envman run`` stands on the image ID the
    project is pinned to ("runs stay on the image id"), checked with its verdict, but the compose
    service and the Dev Container's ``FROM`` get ``local_run_image``: the tag
    ``envman/<stack>:latest`` (or the project image's tag). At ``docker compose up`` /
    ``devcontainer up`` time the engine runs whatever that tag names then: a neighbour's re-tag
    (a planted ``:latest``) or simply a newer promotion the project was never moved to. The
    exported image must be the ID (or digest) envman run would use."""
    from envman.cluster.k8s import local_run_image
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve
    from envman.state import stable_ref
    from tests.support.fake_engine import FakeEngine, patch_connect
    from tests.unit.project.test_file import proj

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    stack = resolve(load_matrix(), "torch-2.4-cpu")
    eng = FakeEngine.with_images({stable_ref(stack): "sha256:" + "5" * 64})
    patch_connect(monkeypatch, eng)
    _smoke_passed("sha256:" + "5" * 64)
    p = proj(tmp_path / "p", "")  # no apt, no requirements: it runs on the stack's image itself
    image = local_run_image(p, stack)
    assert image.startswith("sha256:") or "@sha256:" in image, f"exported as the movable tag {image}"


def _smoke_passed(image_id):
    from envman.images.build import SmokeReport, save_report

    save_report(SmokeReport(stack="s", image="i", image_id=image_id, overall="pass", reason="", gpus_requested=False,
                            probe=None, exit_code=0, stderr_tail=""))


def test_a_local_export_follows_the_pin_and_the_project_image_this_user_built(tmp_path, monkeypatch):
    """Boundaries: a pinned project exports its pin's ID, not the stable tag's newer image (what
    ``envman run`` runs); a project image is exported as the ID this user's build recorded, a
    neighbour's image under the project's tag being built over; compose names the bare ID, the
    Dev Container's FROM the tag (BuildKit builds no FROM of a local ID) with the ID it was checked as."""
    from envman.cluster.export import compose_service, devcontainer
    from envman.cluster.k8s import local_run
    from envman.images.pins import project_key, save_pin
    from envman.matrix.load import load_matrix
    from envman.project.image import project_image_ref
    from envman.stack.resolve import resolve
    from envman.state import stable_ref
    from tests.support.fake_engine import FakeEngine, patch_connect
    from tests.unit.project.test_file import proj

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    stack = resolve(load_matrix(), "torch-2.4-cpu")
    old, new = "sha256:" + "1" * 64, "sha256:" + "2" * 64
    eng = FakeEngine.with_images({stable_ref(stack): new})
    eng.add_image(None, old)
    _smoke_passed(old)
    _smoke_passed(new)
    patch_connect(monkeypatch, eng)
    p = proj(tmp_path / "p", "")
    save_pin(project_key(p.name, str(p.root.resolve())), stack.name, old)
    assert local_run(p, stack) == (old, stable_ref(stack))
    q = proj(tmp_path / "q", 'apt = ["ffmpeg"]\n')
    ref = project_image_ref(q, stack.name, new)
    planted = eng.add_image(ref, "sha256:" + "e" * 64)
    image_id, tag = local_run(q, stack)
    assert tag == ref and image_id.startswith("sha256:") and image_id != planted
    x = _input(image=tag, image_id=image_id, environment=())
    assert compose_service(x, uid=1, gid=1, home="/h")["image"] == image_id.removeprefix("sha256:")
    _, dockerfile = devcontainer(x, None)
    assert f"FROM {tag}\n" in dockerfile and image_id in dockerfile
    assert compose_service(_input(image="envman/x:1"), uid=1, gid=1, home="/h")["image"] == "envman/x:1"


def test_without_an_engine_a_local_export_names_the_tag_and_says_so_and_a_project_image_is_refused(tmp_path, monkeypatch):
    from envman.cluster.k8s import local_run
    from envman.errors import EngineError
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve
    from envman.state import stable_ref
    from tests.unit.project.test_file import proj

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    stack = resolve(load_matrix(), "torch-2.4-cpu")
    told: list[str] = []
    assert local_run(proj(tmp_path / "p", ""), stack, told.append) == ("", stable_ref(stack))
    assert len(told) == 1 and "anyone on the engine can move" in told[0]
    with pytest.raises(EngineError):
        local_run(proj(tmp_path / "q", 'apt = ["ffmpeg"]\n'), stack)


def test_with_no_promoted_image_yet_a_local_export_names_the_tag_and_says_so(tmp_path, monkeypatch):
    """An engine with no image of the stack to check: a project on the stack image is exported by
    tag with one warning; a project image cannot be built, and is refused in one line."""
    from envman.cluster.k8s import local_run
    from envman.errors import UserError
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve
    from envman.state import stable_ref
    from tests.support.fake_engine import FakeEngine, patch_connect
    from tests.unit.project.test_file import proj

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    patch_connect(monkeypatch, FakeEngine())
    stack = resolve(load_matrix(), "torch-2.4-cpu")
    told: list[str] = []
    assert local_run(proj(tmp_path / "p", ""), stack, told.append) == ("", stable_ref(stack))
    assert len(told) == 1 and "no promoted image" in told[0]
    with pytest.raises(UserError, match="no promoted image"):
        local_run(proj(tmp_path / "q", 'apt = ["ffmpeg"]\n'), stack)
