"""``envman export`` by rule (issue 23, the mutation run over envman/cluster/export.py): every
exporter's files exactly (golden files), every refusal exactly (what, where, fix), every kind of
environment value kept out of every exported file and written literally to the env files, every
mount under ``envman run``'s policy and the Dev Containers tools' mount syntax, and the file writer.

Golden files: tests/data/export/. After a deliberate change, rewrite them with
``ENVMAN_REGEN_GOLDEN=1 pytest tests/unit/cluster/test_export_rules.py`` and review the diff."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from envman.cluster import export as X
from envman.cluster.export import ExportInput
from envman.cluster.gfd import gfd_node_terms
from envman.errors import EnvmanError, UserError
from envman.matrix.load import load_matrix
from envman.project.file import GpuRequest, Mount, Port
from envman.stack.resolve import resolve

GOLDEN = Path(__file__).resolve().parents[2] / "data" / "export"
DIGEST = "sha256:" + "cd" * 32
#: Values of every kind an [environment] may hold (the project file refuses line breaks and NUL).
VALUES = (("EMPTY", ""), ("SPACES", "a b  c"), ("SQ", "it's"), ("DQ", 'say "hi"'), ("DOLLAR", "$HOME ${X} $$"),
          ("TICK", "`id`"), ("HASH", "# not a comment"), ("EQ", "a=b=c"), ("BACKSLASH", "a\\nb\\"), ("UNI", "Grüße ☃"),
          ("YAML", "key: [x]"), ("OPENAI_API_KEY", "sk-4f1d9e"), ("PLAIN", "plain-7a2b"))


def _refusal(fn, *args, **kw) -> tuple[str, str, str | None, str | None]:
    with pytest.raises(EnvmanError) as e:
        fn(*args, **kw)
    return type(e.value).__name__, e.value.what, e.value.where, e.value.fix


def _input(case: str = "full", **kw) -> ExportInput:
    m = load_matrix()
    if case == "full":
        base = dict(project="My_Proj.v2", root=Path("/srv/p"), stack=resolve(m, "torch-2.4-cuda12.4"),
                    image=f"reg.example:5000/envman/x@{DIGEST}", command=("python", "train.py", "--x", "$HOME"),
                    environment=VALUES, mounts=(Mount("/srv/data", "/data", True), Mount("/srv/out", "/out")),
                    ports=(Port(8888, 8888), Port(6006, 6007)), gpus=GpuRequest("devices", devices=("0", "2")), shm_size="8g")
    else:
        base = dict(project="p", root=Path("/srv/q"), stack=resolve(m, "torch-2.4-cpu"), image=f"r/p@{DIGEST}", command=(),
                    environment=(), mounts=(), ports=(), gpus=None, shm_size="512m")
    base.update(kw)
    return ExportInput(**base)


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("ENVMAN_REGEN_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.read_text() == text, f"{name} differs from its golden file (ENVMAN_REGEN_GOLDEN=1 rewrites it)"


# --------------------------------------------------------------------------- every file, exactly


@pytest.mark.parametrize("case", ["full", "cpu"])
def test_every_exported_file_is_exactly_the_reviewed_one(case):
    x = _input(case)
    gpus = 2 if case == "full" else 0
    job, keys = X.k8s_job(x, gpus=gpus, **({"runtime_class": "nvidia", "uid": 1234, "gid": 5678,
                                             "git": ("https://git.example/a/b.git", "v1.2")} if case == "full" else {}))
    assert keys == [k for k, _ in x.environment]
    assert yaml.safe_load(X.to_yaml(job)) == job
    pod = job["spec"]["template"]["spec"]
    if gpus:  # the terms follow the shipped matrix: test_export checks them against the verdict
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms["nodeSelectorTerms"] == [{"matchExpressions": t} for t in gfd_node_terms(x.stack)]
        terms["nodeSelectorTerms"] = "(gfd_node_terms)"
    _golden(f"k8s-{case}.yaml", X.to_yaml(job))
    doc, dockerfile = X.devcontainer(x, "/state/exports/p.env" if x.environment else None, uid=1000)
    _golden(f"devcontainer-{case}.json", json.dumps(doc, indent=2) + "\n")
    _golden(f"devcontainer-{case}.Dockerfile", dockerfile)
    svc = X.compose_service(x, uid=1000, gid=1001, home="/h/$p")
    _golden(f"compose-{case}.yaml", X.to_yaml(X.compose({x.project: svc})))
    _golden(f"env-{case}.env", X.env_file_text(x.environment))
    _golden(f"env-{case}.sh", X.shell_env_file_text(x.environment))


# --------------------------------------------------------------------------- values, mounts, refusals


@pytest.mark.parametrize("exporter", ["k8s", "devcontainer", "compose"])
def test_no_environment_value_of_any_kind_reaches_an_exported_file(exporter):
    x = _input()
    if exporter == "k8s":
        text = X.to_yaml(X.k8s_job(x, gpus=1)[0])
    elif exporter == "devcontainer":
        doc, dockerfile = X.devcontainer(x, "/e")
        text = json.dumps(doc) + dockerfile
    else:
        text = X.to_yaml(X.compose({"p": X.compose_service(x, uid=1, gid=1, home="/h")}))
    for name, value in VALUES:
        if len(value) > 3:
            assert value not in text and json.dumps(value)[1:-1] not in text, (exporter, name)


def test_the_env_files_hold_each_value_literally():
    import subprocess

    assert X.env_file_text(VALUES).splitlines() == [f"{k}={v}" for k, v in VALUES]
    names = " ".join(f'"${X.compose_env_name(k)}"' for k, _ in VALUES)
    out = subprocess.run(["sh", "-c", X.shell_env_file_text(VALUES) + f"printf '%s\\0' {names}"], capture_output=True,
                         text=True)
    assert out.stdout.split("\0")[:-1] == [v for _, v in VALUES]


@pytest.mark.parametrize("bad", ["\0", "\n", "\r"])
@pytest.mark.parametrize("writer", [X.env_file_text, X.shell_env_file_text])
def test_a_value_with_a_line_break_or_nul_is_refused_by_both_env_files(writer, bad):
    assert _refusal(writer, (("A", "ok"), ("K", f"x{bad}Y=1"))) == (
        "UserError", "environment variable K: its value holds a line break or a NUL byte", "envman export",
        "put multi-line data in a file in the project and read it")


UNSAFE = [",", '"', "=", "${", "\n", "\r", "\0"]
DC_FIX = "rename the folder, or use envman run (it quotes mounts)"


@pytest.mark.parametrize("bad", UNSAFE)
@pytest.mark.parametrize("field", ["project folder", "env file", "mount source", "mount target", "read-only mount source"])
def test_every_devcontainer_path_holding_mount_syntax_is_refused(field, bad):
    path = f"/srv/a{bad}b"
    kw = {"project folder": dict(root=Path(path)), "env file": {},
          "mount source": dict(mounts=(Mount(path, "/t"),)), "mount target": dict(mounts=(Mount("/srv/s", path),)),
          "read-only mount source": dict(mounts=(Mount(path, "/t", True),))}[field]
    what = field.removeprefix("read-only ")
    if bad in "\0\n\r" and "mount" in field:  # no exporter carries them (the project file refuses them too)
        m = kw["mounts"][0]
        assert _refusal(X.devcontainer, _input(**kw), "/e") == (
            "UserError", f"mount {m.source!r}:{m.target!r} holds a NUL byte or a line break", "envman export",
            "no exported file may carry it")
        assert _refusal(X.compose_service, _input(**kw), uid=1, gid=1, home="/h")[1].endswith("a NUL byte or a line break")
        return
    assert _refusal(X.devcontainer, _input(**kw), path if field == "env file" else "/e") == (
        "UserError", f"{what} {path!r} holds {bad!r}, which the Dev Containers tools would read as mount syntax",
        "envman export devcontainer", DC_FIX)


def test_a_devcontainer_without_an_env_file_has_no_variables():
    assert _refusal(X.devcontainer, _input(), None) == (
        "UserError", "the project sets environment variables: they need an env file", "envman export devcontainer", None)
    doc, _ = X.devcontainer(_input("cpu"), None)
    assert "--env-file" not in doc["runArgs"]


@pytest.mark.parametrize("exporter", ["devcontainer", "compose"])
@pytest.mark.parametrize("source", ["/etc", "/etc/ssl", "/var/run/docker.sock", "/", "/proc/1", "/var/lib/docker"])
def test_every_exporter_refuses_what_envman_run_refuses_exactly(exporter, source):
    from envman.project.policy import forbidden_reason

    x = _input(mounts=(Mount("/srv/ok", "/ok"), Mount(source, "/x", True)))
    fn = (lambda: X.devcontainer(x, "/e")) if exporter == "devcontainer" else \
        (lambda: X.compose_service(x, uid=1, gid=1, home="/h"))
    assert _refusal(fn) == ("UserError", f"mount {source}:/x is refused: {forbidden_reason(source)}", "envman export",
                            "no exported file may mount it")


REFUSALS = [
    (lambda: X.k8s_job(_input(image="reg.example/x:1"), gpus=0),
     ("UserError", "image 'reg.example/x:1' is not pinned by digest", "envman export k8s",
      "push it (envman push STACK prints REPO@sha256:...) or pass --image REPO@sha256:...")),
    (lambda: X.k8s_job(_input(), gpus=0, uid=0),
     ("UserError", "uid 0 / gid 1000: the Job runs as a non-root uid", None, "give --uid 1000 or another uid > 0")),
    (lambda: X.k8s_job(_input(), gpus=0, gid=-1),
     ("UserError", "uid 1000 / gid -1: the Job runs as a non-root uid", None, "give --uid 1000 or another uid > 0")),
    (lambda: X.k8s_job(_input(), gpus=-1), ("UserError", "--gpus -1: expected a count >= 0", None, None)),
    (lambda: X.k8s_job(_input("cpu"), gpus=1),
     ("UserError", "torch-2.4.1-cpu-py3.12 is a CPU build: it uses no GPU", "--gpus", "drop --gpus, or use a CUDA stack")),
    (lambda: X.k8s_job(_input(), gpus=0, runtime_class="Nvidia"),
     ("UserError", "'Nvidia' is not a RuntimeClass name", "--runtime-class", "lowercase letters, digits, - and . (e.g. nvidia)")),
    (lambda: X.k8s_job(_input(project="__"), gpus=0), ("UserError", "'__' makes no Kubernetes Job name", None,
                                                       "use letters, digits and -")),
    (lambda: X.k8s_name("..."), ("UserError", "'...' makes no Kubernetes name", None, "use letters, digits and -")),
    (lambda: X.compose({"--": {}}), ("UserError", "'--' makes no Kubernetes compose service name", None,
                                     "use letters, digits and -")),
    (lambda: X.check_git("http://git.example/a", "main"),
     ("UserError", "'http://git.example/a' is not a repository URL envman puts in a Job", "--git",
      "https://HOST/PATH without user@ or ?query (a private repository: a Secret and your own init container)")),
    (lambda: X.check_git("https://git.example/a", "a..b"),
     ("UserError", "'a..b' is not a git ref", "--git-ref", "a branch, a tag or a commit id")),
    (lambda: gfd_node_terms(type("S", (), {"cuda": "12.4", "min_driver": "550", "toolkit_driver": None, "sass_archs": (),
                                              "ptx_archs": (), "name": "s"})()),
     ("UserError", "s lists no GPU architecture (no SASS, no PTX): no node could run it", "matrix",
      "fix the row's sass/ptx lists, or use a CPU stack")),
]


@pytest.mark.parametrize("call,expected", REFUSALS, ids=[str(i) for i in range(len(REFUSALS))])
def test_every_export_refusal_is_its_exact_line(call, expected):
    assert _refusal(call) == expected


def test_messages_show_at_most_a_bounded_part_of_a_long_url_or_ref():
    url = "https://" + "a" * 200 + "?q"
    assert _refusal(X.check_git, url, "main")[1] == f"{url[:120]!r} is not a repository URL envman puts in a Job"
    ref = "r" * 100 + ".."
    assert _refusal(X.check_git, "https://g.example/x", ref)[1] == f"{ref[:80]!r} is not a git ref"


@pytest.mark.parametrize("uid,gid,ok", [(1, 0, True), (0, 0, False), (1, -1, False), (65534, 65534, True)])
def test_the_job_s_uid_and_gid_boundaries(uid, gid, ok):
    if ok:
        ctx = X.k8s_job(_input(), gpus=0, uid=uid, gid=gid)[0]["spec"]["template"]["spec"]["securityContext"]
        assert (ctx["runAsUser"], ctx["runAsGroup"], ctx["fsGroup"]) == (uid, gid, gid)
    else:
        with pytest.raises(UserError, match="non-root uid"):
            X.k8s_job(_input(), gpus=0, uid=uid, gid=gid)


@pytest.mark.parametrize("name,ok", [("a" * 253, True), ("a" * 254, False), ("a.b-c", True), ("a-", False), ("-a", False),
                                     ("a_b", False), ("1", True)])
def test_runtime_class_names(name, ok):
    if ok:
        assert X.k8s_job(_input(), gpus=0, runtime_class=name)[0]["spec"]["template"]["spec"]["runtimeClassName"] == name
    else:
        with pytest.raises(UserError, match="RuntimeClass"):
            X.k8s_job(_input(), gpus=0, runtime_class=name)


@pytest.mark.parametrize("text,name", [("My_Proj.v2", "my-proj-v2"), ("-a-", "a"), ("a" * 70, "a" * 63),
                                       ("a" * 62 + "-b", "a" * 62), ("-" * 10 + "a" * 60, "a" * 60), (" x ", "x"), ("Ünï", "n"), ("a--b", "a--b")])
def test_kubernetes_names(text, name):
    assert X.k8s_name(text) == name


@given(st.text(max_size=80))
@settings(max_examples=300, deadline=None)
def test_a_kubernetes_name_is_a_dns_label_or_refused(text):
    import re

    try:
        name = X.k8s_name(text)
    except UserError:
        assert not re.search(r"[a-z0-9]", text.lower())
        return
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 63


@pytest.mark.parametrize("size,q", [("3k", "3Ki"), ("1025", "1025"), ("1024", "1Ki"), ("1536m", "1536Mi"), ("1g", "1Gi"),
                                    ("2048g", "2Ti"), ("1", "1")])
def test_sizes_as_kubernetes_quantities(size, q):
    assert X.quantity(size) == q


@pytest.mark.parametrize("url,ref,ok", [
    ("https://g.example/a/b.git", "main", True), ("https://g.example:8443/a", "v1.0", True), ("https://g.example", "a" * 200, True),
    ("https://g.example/a/../b", "main", False), ("https://u@g.example/a", "main", False), ("https://g.example/a?x", "main", False),
    ("https://g.example/a", "a" * 201, False), ("https://g.example/a", "x.lock", False), ("https://g.example/a", "x/", False),
    ("https://g.example/a", "-x", False), ("https://g.example:123456/a", "main", False), ("https://g.example/a", "a b", False)])
def test_git_urls_and_refs(url, ref, ok):
    if ok:
        assert X.check_git(url, ref) == (url, ref)
    else:
        with pytest.raises(UserError):
            X.check_git(url, ref)


# --------------------------------------------------------------------------- writing files


def test_write_output_refuses_what_is_in_the_way_and_writes_nothing(tmp_path):
    a, b = tmp_path / "d" / "a.yaml", tmp_path / "d" / "b.yaml"
    a.parent.mkdir()
    b.write_text("mine\n")
    assert _refusal(X.write_files, {a: "1", b: "2"}, force=False) == (
        "UserError", f"{b} exists", "envman export", "pass --force to overwrite it, or -o another path")
    assert not a.exists() and b.read_text() == "mine\n"
    assert X.write_files({a: "1\n", b: "2\n"}, force=True) == [a, b]
    assert (a.read_text(), b.read_text()) == ("1\n", "2\n")
    (tmp_path / "dir.yaml").mkdir()
    assert _refusal(X.write_files, {a: "x", tmp_path / "dir.yaml": "y"}, force=True) == (
        "UserError", f"cannot write {tmp_path / 'dir.yaml'}: a directory is in the way", "envman export", "choose another -o")
    (tmp_path / "file").write_text("")
    assert _refusal(X.write_files, {tmp_path / "file" / "x.yaml": "y"}, force=False)[1] == (
        f"cannot write {tmp_path / 'file' / 'x.yaml'}: a directory is in the way")
    assert a.read_text() == "1\n"


# --------------------------------------------------------------------------- the YAML writer


#: Every key YAML 1.1 readers (kubectl's among them) take for a boolean or null, in every case.
RESERVED = ["true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"]
KEYS = st.one_of(st.sampled_from(RESERVED + [w.upper() for w in RESERVED] + [w.title() for w in RESERVED]
                                 + ["a", "app.kubernetes.io/name", "x-y_z", "1", "-a", "a b", "a: b", "#c", "", "é"]),
                 st.text(max_size=6))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                    st.text(st.characters(blacklist_categories=("Cs",)), max_size=12))
DOCS = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(KEYS, inner, max_size=4)), max_leaves=20)


@given(DOCS)
@settings(max_examples=300, deadline=None)
def test_yaml_round_trips_every_json_like_document(doc):
    text = X.to_yaml(doc)
    assert yaml.safe_load(text) == doc
    assert text.endswith("\n") and not text.startswith("\n") and text.isascii()


@pytest.mark.parametrize("key", RESERVED + [w.upper() for w in RESERVED] + [w.title() for w in RESERVED])
def test_every_key_a_yaml_reader_would_take_for_a_boolean_or_null_is_quoted(key):
    assert X.to_yaml({key: 1}) == f'"{key}": 1\n'


def test_the_yaml_writer_s_exact_forms():
    doc = {"a": None, "b": True, "c": False, "d": -3, "e": "x", "f": {}, "g": [], "h": [{}, [], [1, [2]], {"i": "😀é"}],
           "j": {"k": [{"l": 1, "m": [True]}]}, "a b": 1}
    assert X.to_yaml(doc) == (
        'a: null\nb: true\nc: false\nd: -3\ne: "x"\nf: {}\ng: []\nh:\n  - {}\n  - []\n  -\n    - 1\n    -\n      - 2\n'
        '  - i: "\\U0001f600\\u00e9"\nj:\n  k:\n    - l: 1\n      m:\n        - true\n"a b": 1\n')
    assert X.to_yaml("x") == ' "x"\n' and X.to_yaml([]) == " []\n" and X.to_yaml(None) == " null\n"
    assert X._yaml_string("\\ud83d\\ude00") == '"\\\\ud83d\\\\ude00"'  # an escaped escape stays text
    with pytest.raises(TypeError, match="cannot write float as YAML"):
        X.to_yaml({"a": 1.5})


@pytest.mark.parametrize("gpus,flag,device", [
    (GpuRequest("all"), "all", {"driver": "nvidia", "capabilities": ["gpu"], "count": "all"}),
    (GpuRequest("count", count=3), "3", {"driver": "nvidia", "capabilities": ["gpu"], "count": 3}),
    (GpuRequest("devices", devices=("1",)), '"device=1"', {"driver": "nvidia", "capabilities": ["gpu"], "device_ids": ["1"]}),
    (GpuRequest("devices", devices=("0", "3")), '"device=0,3"',
     {"driver": "nvidia", "capabilities": ["gpu"], "device_ids": ["0", "3"]}),
])
def test_every_gpu_request_in_the_devcontainer_and_compose(gpus, flag, device):
    doc, _ = X.devcontainer(_input(gpus=gpus), "/e")
    args = doc["runArgs"]
    assert args[args.index("--gpus") + 1] == flag and args.count("--gpus") == 1 and doc["hostRequirements"] == {"gpu": True}
    svc = X.compose_service(_input(gpus=gpus), uid=1, gid=1, home="/h")
    assert svc["deploy"] == {"resources": {"reservations": {"devices": [device]}}}
    cpu_stack, _ = X.devcontainer(_input("cpu", gpus=gpus), None)  # a CPU stack asks the host for no GPU
    assert cpu_stack["hostRequirements"] == {"gpu": False}


@pytest.mark.parametrize("value", ["alpine/git:v2.30.2", "alpine/git", "alpine/git@sha256:" + "a" * 63, "X" * 300])
def test_a_clone_image_not_pinned_by_digest_is_refused_exactly(value):
    with pytest.raises(UserError) as e:
        X.check_git_image(value)
    assert (e.value.what, e.value.where, e.value.fix) == (
        f"image {value[:120]!r} is not pinned by digest", "--git-image",
        "give REPO@sha256:<64 hex> (docker buildx imagetools inspect REPO:TAG prints it)")


@pytest.mark.parametrize("name", ["X", "dataX", "XX-set"])
def test_an_exported_mount_of_an_ordinary_folder_passes_whatever_its_letters(tmp_path, name):
    from envman.project.file import Mount

    src = tmp_path / name
    src.mkdir()
    (mount,) = X.checked_mounts([Mount(str(src), "/" + name, True)])
    assert (mount.source, mount.target) == (os.path.realpath(src), "/" + name)


# --------------------------------------------------------------------------- Kubernetes' $(VAR) expansion


def _kubelet_expand(arg: str, env: dict[str, str]) -> str:
    """Kubernetes' own expansion of a container's ``command``/``args`` (its forked
    ``expansion`` package): ``$(NAME)`` of a variable the container defines becomes its value,
    ``$$`` becomes ``$``; anything else is kept."""
    out, i = [], 0
    while i < len(arg):
        if arg[i] == "$" and i + 1 < len(arg):
            nxt = arg[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = arg.find(")", i + 2)
                if end != -1 and arg[i + 2:end] in env:
                    out.append(env[arg[i + 2:end]])
                    i = end + 1
                    continue
        out.append(arg[i])
        i += 1
    return "".join(out)


def _k8s_cpu_input(command: tuple[str, ...]) -> ExportInput:
    return _input("cpu", command=command, environment=(("WANDB_API_KEY", "s3cret"),))


def _expanded(container: dict, key: str) -> tuple[str, ...]:
    env = {e["name"]: e.get("value", "<secret:" + e["name"] + ">") for e in container.get("env", ())}
    return tuple(_kubelet_expand(a, env) for a in container.get(key, ()))


@pytest.mark.parametrize("command", [
    ("python", "train.py", "--note", "$(WANDB_API_KEY)"),
    ("sh", "-c", "echo $(ENVMAN_PROJECT) $$ $$(x)"),
    ("python", "-c", "print('$(WANDB_API_KEY)')"),
    # variants: an undefined name, $ at the end, $$ before a defined name, nested and unclosed
    ("echo", "$(NOPE)", "$", "x$", "$$(WANDB_API_KEY)", "$$$(WANDB_API_KEY)", "$((ENVMAN_STACK))", "$(ENVMAN_STACK"),
    ("echo", "$HOME", "${WANDB_API_KEY}", "$$$$", "plain"),
])
def test_a_command_exported_to_kubernetes_runs_the_same_argv_as_envman_run(command):
    """Attack (the compose ``$`` leak, in the Kubernetes exporter): the kubelet expands
    ``$(VAR)`` in a container's ``args`` from the container's own environment, which in the
    exported Job holds every project variable from the Secret. A command such as ``python
    train.py --note $(WANDB_API_KEY)`` (literal under ``envman run``) became, in the Job, the
    token itself on the process's command line (``ps``, ``/proc/*/cmdline``, logs), and ``$$``
    became ``$``: the exported command was not the one envman runs. Kubernetes' escape is
    ``$$``, as compose's is."""
    job, _ = X.k8s_job(_k8s_cpu_input(command), gpus=0)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert _expanded(container, "args") == command
    assert "s3cret" not in X.to_yaml(job)


@given(st.lists(st.text(alphabet="$()AB_x ", max_size=12), min_size=1, max_size=4))
@settings(max_examples=200, deadline=None)
def test_every_argument_the_kubelet_reads_is_the_one_envman_runs(command):
    """Whatever mix of ``$``, parentheses and names an argument holds, the kubelet's expansion
    of the exported ``args`` gives back the command exactly."""
    job, _ = X.k8s_job(_input("cpu", command=tuple(command), environment=(("A", "1"), ("AB", "2"), ("B_x", "3"))), gpus=0)
    assert _expanded(job["spec"]["template"]["spec"]["containers"][0], "args") == tuple(command)


def test_the_clone_container_runs_its_script_url_and_ref_as_written():
    """The init container's ``command`` is expanded by the kubelet as well: the script's own
    ``$0``/``$1`` reach ``sh`` as written."""
    job, _ = X.k8s_job(_input("cpu"), gpus=0, git=("https://git.example/a/b.git", "v1.2"))
    init = job["spec"]["template"]["spec"]["initContainers"][0]
    assert _expanded(init, "command") == ("/bin/sh", "-c", X.CLONE_SCRIPT, "https://git.example/a/b.git", "v1.2")


@given(st.text(alphabet="$()AB_x ", max_size=16))
@settings(max_examples=300, deadline=None)
def test_the_kubernetes_escape_is_undone_exactly_by_the_kubelet(text):
    """One escape for every field the kubelet expands (``command``, ``args``, literal ``env``
    values): whatever the text, the kubelet's expansion of it gives the text back."""
    assert _kubelet_expand(X._k8s_escape(text), {"A": "1", "AB": "2", "B_x": "3"}) == text


def test_the_job_s_literal_environment_values_are_written_escaped():
    x = _input("cpu", environment=(("WANDB_API_KEY", "s3cret"),))
    container = X.k8s_job(x, gpus=0)[0]["spec"]["template"]["spec"]["containers"][0]
    literal = {e["name"]: _kubelet_expand(e["value"], {"WANDB_API_KEY": "s3cret"}) for e in container["env"] if "value" in e}
    assert literal["ENVMAN_PROJECT"] == x.project and literal["ENVMAN_STACK"] == x.stack.name
