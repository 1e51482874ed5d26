"""Files other tools read: a Kubernetes Job, a Dev Container, a compose file (``envman export``).

Everything here is pure (data in, a dict out) except :func:`write_files`. The formats:

* **Kubernetes** (:func:`k8s_job`): a ``batch/v1`` Job on the pushed image *by digest*, the
  project's command as ``args`` (the image's entrypoint stays: it makes any uid a user), GPUs as
  ``nvidia.com/gpu`` limits, ``/dev/shm`` as an in-memory ``emptyDir`` with the run's size, a
  non-root uid, no privilege escalation, every capability dropped, and a required node affinity
  on NVIDIA GPU Feature Discovery labels computed from the matrix (:func:`envman.cluster.gfd.gfd_node_terms`).
* **Dev Containers** (:func:`devcontainer`): ``.devcontainer/devcontainer.json`` plus a two-line
  ``Dockerfile`` ``FROM`` the project's run image that gives it a named user (``envman``), so
  that ``remoteUser`` / ``updateRemoteUserUID`` map it to the host user as ``envman run``'s
  ``--user`` does; the project is mounted at ``/workspace``; GPUs via ``hostRequirements.gpu``
  and ``runArgs``.
* **Compose** (:func:`compose`): one service per project, GPUs as
  ``deploy.resources.reservations.devices``.

Environment values (the project file's and the user config's ``[environment]``) are never
written into an exported file, whatever their names: any of them may be a secret. Kubernetes gets
a ``secretKeyRef`` per variable to a Secret named after the Job, and the Dev Container a
``runArgs`` ``--env-file``, both from a file in envman's private state directory, mode 0600
(:func:`env_file_text`, written by the command, which prints the kubectl command that creates
the Secret from it). Compose services name the variables without a value (compose takes them
from the shell it runs in, each under a name of envman's, ``ENVMAN_ENV_<NAME>``; the command
writes them as ``export`` lines to source first, :func:`shell_env_file_text`: a name the project
chose is never set in the user's shell): Compose v1 and v2 parse ``env_file`` values differently (quotes,
``$``), so no env file could mean the same to both. Nothing is ever taken from envman's own
environment.

Mounts are exported under the same policy as ``envman run`` (:func:`envman.project.policy.
forbidden_reason` on every source, checked again here) and in a form each tool reads field by
field: compose's long syntax, the Dev Container's object form. The Dev Containers tools turn
those objects (and ``workspaceMount``) into ``--mount`` strings without quoting and substitute
``${...}`` in them, so a path holding ``,``, ``"``, ``=`` or ``${`` is refused rather than
exported (``./data:/t,source=/etc`` would otherwise mount the host's ``/etc``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envman import labels as L
from envman.cluster.gfd import gfd_node_terms
from envman.engine.values import GpuRequest, Mount
from envman.errors import UserError
from envman.paths import CONTAINER_HOME, WORKSPACE
from envman.project.file import NETWORK_NONE, NETWORK_PROJECT, Port, shm_bytes
from envman.stack.names import Stack

GPU_RESOURCE = "nvidia.com/gpu"
DIGEST_REF_RE = re.compile(r"^[a-z0-9][A-Za-z0-9._:/\[\]-]*@sha256:[0-9a-f]{64}$")
DEVCONTAINER_USER = "envman"


# --------------------------------------------------------------------------- shared pieces


def k8s_name(text: str, *, what: str = "name") -> str:
    """``text`` as a DNS-1123 label (lowercase, digits, ``-``; 1-63 characters)."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63].strip("-")  # a label whenever not empty
    if not name:
        raise UserError(f"{text!r} makes no Kubernetes {what}", fix="use letters, digits and -")
    return name


def quantity(size: str) -> str:
    """A Docker size (``8g``, ``512m``, bytes) as a Kubernetes quantity (``8Gi``, ``512Mi``)."""
    n = shm_bytes(size)
    for unit, factor in (("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)):
        if n % factor == 0:
            return f"{n // factor}{unit}"
    return str(n)


@dataclass(frozen=True)
class ExportInput:
    """What every export needs about one project (its effective run settings)."""

    project: str
    root: Path
    stack: Stack
    image: str
    command: tuple[str, ...]
    environment: tuple[tuple[str, str], ...]
    mounts: tuple[Mount, ...]
    ports: tuple[Port, ...]
    gpus: GpuRequest | None
    shm_size: str
    network: str = NETWORK_PROJECT  # envman.project.file.NETWORK_MODES
    #: The ID of the image ``image`` named when envman checked it (a local export's image), or "".
    image_id: str = ""


def run_environment(x: ExportInput, gpus: GpuRequest | None | bool = True) -> tuple[tuple[str, str], ...]:
    """The project's variables as ``envman run`` passes them (:func:`envman.run.plan.
    sanitize_environment`): its own GPU variables dropped (the GPU request decides), and every
    ``NVIDIA_*`` / ``CUDA_VISIBLE_DEVICES``-style one when the export asks for no GPU.
    ``gpus``: ``True`` for the project's request, or the export's own (``None``: no GPU)."""
    from envman.run.plan import sanitize_environment

    return sanitize_environment(x.environment, x.gpus if gpus is True else (gpus or None))[0]


#: What a CPU export sets, as ``envman run`` does for a run without GPUs: an engine or node whose
#: default runtime is NVIDIA's would otherwise attach every GPU (nvidia/cuda images set "all").
CPU_GPU_ENV = ("NVIDIA_VISIBLE_DEVICES", "void")


# --------------------------------------------------------------------------- Kubernetes


#: The default image of the init container that clones the project into the workspace: git on
#: Alpine, as published by the alpine-docker/git project (its README names v2.30.2 as a multi-arch
#: release). A tag, which its publisher can move: no digest of it could be confirmed from a source
#: here, so none is written; ``envman export k8s --git-image REPO@sha256:...`` pins one (and names
#: a mirror for an air-gapped cluster), and the command warns while the tag is used.
GIT_IMAGE = "alpine/git:v2.30.2"
_GIT_URL = re.compile(r"https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%+/-]*)?")
_GIT_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,199}")
#: Clone the repository (``$0``) into the workspace and check out the ref (``$1``); both are
#: arguments of the shell, never part of its code.
CLONE_SCRIPT = f'git clone --quiet -- "$0" {WORKSPACE} && git -C {WORKSPACE} checkout --quiet --detach "$1"'


def check_git(url: str, ref: str) -> tuple[str, str]:
    """A repository URL (https, no credentials, no query) and a ref (branch, tag or commit)."""
    if not _GIT_URL.fullmatch(url) or ".." in url:
        raise UserError(f"{url[:120]!r} is not a repository URL envman puts in a Job", where="--git",
                        fix="https://HOST/PATH without user@ or ?query (a private repository: a Secret and your own init container)")
    if not _GIT_REF.fullmatch(ref) or ".." in ref or ref.endswith((".lock", "/")):
        raise UserError(f"{ref[:80]!r} is not a git ref", where="--git-ref", fix="a branch, a tag or a commit id")
    return url, ref


def env_file_text(environment: Sequence[tuple[str, str]]) -> str:
    """``NAME=value`` lines, as ``docker run --env-file``, ``kubectl create secret generic
    --from-env-file`` and compose's ``raw`` env files read them: the value literally, up to the
    end of the line (the project file's parser refuses values with line breaks or NUL bytes)."""
    for k, v in environment:
        if any(c in v for c in "\0\n\r"):
            raise UserError(f"environment variable {k}: its value holds a line break or a NUL byte",
                            where="envman export", fix="put multi-line data in a file in the project and read it")
    return "".join(f"{k}={v}\n" for k, v in environment)


#: Compose reads a project variable ``NAME`` from the shell it runs in as ``ENVMAN_ENV_NAME``
#: (the service's ``environment`` says ``NAME: "${ENVMAN_ENV_NAME}"``): the file the user sources
#: before ``docker compose up`` never sets a name the project chose, which that shell, docker and
#: compose would obey (``PATH``, ``LD_PRELOAD``, ``PROMPT_COMMAND``, ``BASH_ENV``, ``DOCKER_HOST``,
#: ``COMPOSE_FILE``, ``ENVMAN_CONFIG_DIR``). Prefixing is one-to-one: two variables never meet.
COMPOSE_ENV_PREFIX = "ENVMAN_ENV_"


def compose_env_name(name: str) -> str:
    """The shell variable compose reads the project variable ``name`` from."""
    return COMPOSE_ENV_PREFIX + name


def shell_env_file_text(environment: Sequence[tuple[str, str]]) -> str:
    """``export ENVMAN_ENV_NAME='value'`` lines a POSIX shell sources (``set -a; . FILE``) before
    ``docker compose up``: each variable under :func:`compose_env_name`, never its own name."""

    env_file_text(environment)  # the same checks
    return "".join(f"export {compose_env_name(k)}={shlex.quote(v)}\n" for k, v in environment)


def check_git_image(value: str) -> str:
    """A clone image given by the user: pinned by digest, as the Job's own image."""
    if not DIGEST_REF_RE.fullmatch(value):
        raise UserError(f"image {value[:120]!r} is not pinned by digest", where="--git-image",
                        fix="give REPO@sha256:<64 hex> (docker buildx imagetools inspect REPO:TAG prints it)")
    return value


def _k8s_escape(arg: str) -> str:
    """The kubelet expands ``$(NAME)`` in a container's ``command``, ``args`` and literal ``env``
    values from the container's environment (the project's variables, from the Secret) and reads
    ``$$`` as ``$``: every ``$`` written ``$$`` makes each word reach the process exactly as
    ``envman run`` gives it."""
    return arg.replace("$", "$$")


def k8s_job(x: ExportInput, *, gpus: int, runtime_class: str | None = None, uid: int = 1000,
            gid: int = 1000, git: tuple[str, str] | None = None,
            git_image: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """The Job, and the names of the variables it reads from the Secret ``<job>-env`` (every
    variable of the project's: values are never written into the Job). The
    workspace is an empty ``emptyDir``; with ``git`` (URL, ref), an init container clones the
    project into it at that ref."""
    if not DIGEST_REF_RE.fullmatch(x.image):
        raise UserError(f"image {x.image!r} is not pinned by digest", where="envman export k8s",
                        fix="push it (envman push STACK prints REPO@sha256:...) or pass --image REPO@sha256:...")
    if uid < 1 or gid < 0:
        raise UserError(f"uid {uid} / gid {gid}: the Job runs as a non-root uid", fix="give --uid 1000 or another uid > 0")
    if x.network == NETWORK_NONE:
        raise UserError('the project asks for no network (network = "none"), which a pod cannot be given',
                        where="envman export k8s",
                        fix="restrict the pod with a NetworkPolicy of the cluster's, or export compose or devcontainer")
    if gpus < 0:
        raise UserError(f"--gpus {gpus}: expected a count >= 0")
    if gpus and x.stack.cuda is None:
        raise UserError(f"{x.stack.name} is a CPU build: it uses no GPU", where="--gpus", fix="drop --gpus, or use a CUDA stack")
    name = k8s_name(x.project, what="Job name")
    secret = f"{name}-env"
    meta_labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "envman"}
    env: list[dict[str, Any]] = [{"name": "ENVMAN_PROJECT", "value": _k8s_escape(x.project)},
                                 {"name": "ENVMAN_STACK", "value": _k8s_escape(x.stack.name)}]
    environment = run_environment(x, (x.gpus or GpuRequest("count", count=gpus)) if gpus else None)
    if not gpus:
        env.append({"name": CPU_GPU_ENV[0], "value": CPU_GPU_ENV[1]})
    secret_keys = []
    for key, _value in environment:
        secret_keys.append(key)
        env.append({"name": key, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}})
    container: dict[str, Any] = {
        "name": "main",
        "image": x.image,
        "workingDir": WORKSPACE,
        "env": env,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
        },
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}, {"name": "workspace", "mountPath": WORKSPACE}],
    }
    if x.command:
        container["args"] = [_k8s_escape(c) for c in x.command]
    if gpus:
        container["resources"] = {"limits": {GPU_RESOURCE: gpus}}
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        # No Kubernetes API credential and no other service's address in the container: like
        # envman run, the Job is given nothing it did not ask for.
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": gid, "fsGroup": gid,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": quantity(x.shm_size)}},
            {"name": "workspace", "emptyDir": {}},
        ],
    }
    if git is not None:
        url, ref = check_git(*git)
        pod["initContainers"] = [{
            "name": "clone",
            "image": GIT_IMAGE if git_image is None else check_git_image(git_image),
            "command": [_k8s_escape(c) for c in ("/bin/sh", "-c", CLONE_SCRIPT, url, ref)],
            "env": [{"name": "HOME", "value": "/tmp"}],
            "securityContext": container["securityContext"],
            "volumeMounts": [{"name": "workspace", "mountPath": WORKSPACE}],
        }]
    if runtime_class is not None:
        if len(runtime_class) > 253 or not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", runtime_class):
            raise UserError(f"{runtime_class!r} is not a RuntimeClass name", where="--runtime-class",
                            fix="lowercase letters, digits, - and . (e.g. nvidia)")
        pod["runtimeClassName"] = runtime_class
    if gpus:
        pod["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": t} for t in gfd_node_terms(x.stack)]}}}
        pod["tolerations"] = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": meta_labels,
                     "annotations": {"envman/stack": x.stack.name, "envman/image": x.image,
                                     "envman/workspace": (f"cloned from {git[0]} at {git[1]}" if git else
                                                          "empty: the code is in the image, or add --git URL")}},
        "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": meta_labels}, "spec": pod}},
    }
    return job, secret_keys


# --------------------------------------------------------------------------- Dev Containers


#: What the Dev Containers tools cannot carry in a mount field: they join the fields into one
#: ``--mount`` string (a comma or a quote would add a field) and substitute ``${...}``.
_DEVCONTAINER_UNSAFE = (",", '"', "=", "${", "\n", "\r", "\0")


def _devcontainer_path(path: str, what: str) -> str:
    bad = next((c for c in _DEVCONTAINER_UNSAFE if c in path), None)
    if bad is not None:
        raise UserError(f"{what} {path!r} holds {bad!r}, which the Dev Containers tools would read as mount syntax",
                        where="envman export devcontainer", fix="rename the folder, or use envman run (it quotes mounts)")
    return path


def checked_mounts(mounts: Sequence[Mount]) -> tuple[Mount, ...]:
    """``mounts`` under ``envman run``'s policy, checked again at export (or submit) time, with
    each source replaced by the real path that was checked: a source that no file may mount
    (:func:`envman.project.policy.forbidden_reason`) is refused, and a symbolic link on the way
    that is repointed later (before ``docker compose up`` or the job starts) no longer changes
    what is mounted. A later swap of a folder on the real path itself is not seen (the tools
    follow links when they mount; docs/security.md)."""

    from envman.project.policy import forbidden_reason

    out = []
    for m in mounts:
        if any(c in p for p in (m.source, m.target) for c in "\0\n\r"):
            raise UserError(f"mount {m.source!r}:{m.target!r} holds a NUL byte or a line break", where="envman export",
                            fix="no exported file may carry it")
        real = os.path.realpath(m.source)
        why = forbidden_reason(real)  # what forbidden_reason(m.source) resolves to: one check, not two
        if why:
            raise UserError(f"mount {m.source}:{m.target} is refused: {why}", where="envman export",
                            fix="no exported file may mount it")
        out.append(Mount(real, m.target, m.read_only))
    return tuple(out)


def devcontainer(x: ExportInput, env_file: str | None = None, *, uid: int | None = None) -> tuple[dict[str, Any], str]:
    """``devcontainer.json`` and its ``Dockerfile`` (FROM the run image, plus a named user).
    ``env_file``: the file holding the project's variables (needed when it has any). The
    container joins ``uid``'s (default: this user's) network of the project, as ``envman run``
    does, made first by ``initializeCommand``; or none."""

    from envman.run.network import create_command
    from envman.run.plan import network_name

    uid = os.getuid() if uid is None else uid
    _devcontainer_path(str(x.root), "project folder")  # ${localWorkspaceFolder} lands in workspaceMount
    network = NETWORK_NONE if x.network == NETWORK_NONE else network_name(uid, x.project, str(x.root))
    # envman run's hardening (envman.run.plan.docker_argv); --rm is left out: the Dev Containers
    # tools stop and start the same container between sessions.
    run_args = ["--init", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--pull", "never",
                "--shm-size", x.shm_size, "--network", network]
    for k, v in L.run_labels(x.project, x.stack.name).items():
        run_args += ["--label", f"{k}={v}"]
    if x.gpus is not None:
        run_args += ["--gpus", _docker_gpus(x.gpus)]
    if run_environment(x):
        if env_file is None:
            raise UserError("the project sets environment variables: they need an env file", where="envman export devcontainer")
        run_args += ["--env-file", _devcontainer_path(env_file, "env file")]
    mounts = checked_mounts(x.mounts)
    for m in mounts:
        _devcontainer_path(m.source, "mount source")
        _devcontainer_path(m.target, "mount target")
        if m.read_only:  # the object form has no read-only field: the same --mount envman run passes
            from envman.run.plan import mount_flag

            run_args += ["--mount", mount_flag(m.source, m.target, True)]
    env = {"ENVMAN_PROJECT": x.project, "ENVMAN_STACK": x.stack.name, "HOME": CONTAINER_HOME}
    if x.gpus is None:
        env[CPU_GPU_ENV[0]] = CPU_GPU_ENV[1]
    doc: dict[str, Any] = {
        "name": f"{x.project} ({x.stack.name})",
        "build": {"dockerfile": "Dockerfile"},
        "workspaceMount": f"source=${{localWorkspaceFolder}},target={WORKSPACE},type=bind",
        "workspaceFolder": WORKSPACE,
        "containerUser": DEVCONTAINER_USER,
        "remoteUser": DEVCONTAINER_USER,
        "updateRemoteUserUID": True,
        "containerEnv": env,
        "runArgs": run_args,
        "mounts": [{"type": "bind", "source": m.source, "target": m.target} for m in mounts if not m.read_only],
        "hostRequirements": {"gpu": bool(x.gpus is not None and x.stack.cuda)},
    }
    if x.ports:
        doc["forwardPorts"] = [p.container for p in x.ports]
    if network != NETWORK_NONE:
        doc["initializeCommand"] = create_command(uid, x.project, str(x.root))
    dockerfile = (
        f"# envman devcontainer image for {x.project}: the run image plus a named user that\n"
        "# updateRemoteUserUID maps to your uid (envman run uses --user for the same). Generated.\n"
        + (f"# envman checked {x.image} as image {x.image_id}: BuildKit cannot build FROM a local image ID,\n"
           "# so FROM names the tag; compare docker image inspect before a rebuild on a shared engine.\n"
           if x.image_id else "")
        + f"FROM {x.image}\n"
        "USER root\n"
        "RUN getent passwd envman >/dev/null || { uid=1000; while getent passwd \"$uid\" >/dev/null; do uid=$((uid + 1)); done; \\\n"
        "      getent group \"$uid\" >/dev/null || echo \"envman:x:$uid:\" >>/etc/group; \\\n"
        f"      echo \"envman:x:$uid:$uid:envman user:{CONTAINER_HOME}:/bin/sh\" >>/etc/passwd; }}\n"
    )
    return doc, dockerfile


def _docker_gpus(g: GpuRequest) -> str:
    if g.kind == "devices":
        return '"device=' + ",".join(g.devices) + '"'
    return "all" if g.kind == "all" else str(g.count)


# --------------------------------------------------------------------------- compose


def _compose_escape(value: str) -> str:
    """Compose interpolates ``$VAR``; a literal ``$`` is written ``$$``."""
    return value.replace("$", "$$")


def compose_service(x: ExportInput, *, uid: int, gid: int, home: str) -> dict[str, Any]:
    """One service; the project's variables without values: compose substitutes each from the
    shell it runs in, under its :func:`compose_env_name`."""
    env: dict[str, Any] = {k: "${" + compose_env_name(k) + "}" for k, _ in run_environment(x)}
    env.update(ENVMAN_PROJECT=x.project, ENVMAN_STACK=x.stack.name, HOME=CONTAINER_HOME)
    if x.gpus is None:
        env[CPU_GPU_ENV[0]] = CPU_GPU_ENV[1]
    volumes: list[dict[str, Any]] = [{"type": "bind", "source": _compose_escape(str(x.root)), "target": WORKSPACE},
               {"type": "bind", "source": _compose_escape(home), "target": CONTAINER_HOME}]
    volumes += [{"type": "bind", "source": _compose_escape(m.source), "target": _compose_escape(m.target),
                 "read_only": m.read_only} for m in checked_mounts(x.mounts)]
    svc: dict[str, Any] = {
        # by ID when envman checked one (compose takes a bare 64-digit local ID): a tag is anyone's to move
        "image": x.image_id.removeprefix("sha256:") if x.image_id else x.image,
        "user": f"{uid}:{gid}",
        "init": True,
        "cap_drop": ["ALL"],  # the hardening of envman run (see envman.run.plan.docker_argv)
        "security_opt": ["no-new-privileges"],
        "pull_policy": "never",  # the local run image, never fetched from a registry
        "working_dir": WORKSPACE,
        "shm_size": x.shm_size,
        "environment": env,
        "volumes": volumes,
        "labels": L.run_labels(x.project, x.stack.name),
    }
    if x.network == NETWORK_NONE:  # else the compose project's own network, apart from other projects'
        svc["network_mode"] = "none"
    if x.command:
        svc["command"] = [_compose_escape(c) for c in x.command]
    if x.ports:
        svc["ports"] = [f"127.0.0.1:{p.host}:{p.container}" for p in x.ports]
    if x.gpus is not None:
        device: dict[str, Any] = {"driver": "nvidia", "capabilities": ["gpu"]}
        if x.gpus.kind == "devices":
            device["device_ids"] = list(x.gpus.devices)
        else:
            device["count"] = "all" if x.gpus.kind == "all" else x.gpus.count
        svc["deploy"] = {"resources": {"reservations": {"devices": [device]}}}
    return svc


def compose(services: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    names = list(services)
    if len(set(names)) != len(names):  # pragma: no cover - a mapping cannot repeat keys
        raise UserError("a project is given twice")
    return {"services": {k8s_name(n, what="compose service name"): s for n, s in services.items()}}


# --------------------------------------------------------------------------- YAML and files


_PLAIN_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")


def to_yaml(value: Any, indent: int = 0) -> str:
    """Block YAML for dicts, lists, strings, numbers and booleans. Every string is written as a
    JSON string (a valid YAML double-quoted scalar), so no value can change the structure."""
    return _yaml(value, indent).lstrip("\n") + "\n"


def _scalar(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return _yaml_string(v)
    raise TypeError(f"cannot write {type(v).__name__} as YAML")


# A surrogate-pair escape that is not itself escaped (preceded by an even run of backslashes).
_SURROGATES_RE = re.compile(r"(?<!\\)((?:\\\\)*)\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})")


def _yaml_string(v: str) -> str:
    """A double-quoted scalar: JSON's escaping (ASCII only, so no character YAML folds as a line
    break survives), with characters beyond U+FFFF as YAML's ``\\U`` escape instead of JSON's
    surrogate pairs."""
    def astral(m: re.Match[str]) -> str:
        hi, lo = int(m.group(2), 16), int(m.group(3), 16)
        return m.group(1) + "\\U%08x" % (0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))

    return _SURROGATES_RE.sub(astral, json.dumps(v))  # ensure_ascii, the default


def _key(k: str) -> str:
    plain = _PLAIN_KEY_RE.fullmatch(k) and k.lower() not in ("true", "false", "null", "yes", "no", "on", "off", "y", "n", "~")
    return k if plain else _yaml_string(k)


def _yaml(v: Any, indent: int) -> str:
    pad = "  " * indent
    if isinstance(v, dict):
        if not v:
            return " {}"
        out = ""
        for k, item in v.items():
            if isinstance(item, (dict, list)) and item:
                out += f"\n{pad}{_key(str(k))}:" + _yaml(item, indent + 1)
            else:
                out += f"\n{pad}{_key(str(k))}:" + (_yaml(item, indent + 1) if isinstance(item, (dict, list)) else f" {_scalar(item)}")
        return out
    if isinstance(v, list):
        if not v:
            return " []"
        out = ""
        for item in v:
            if isinstance(item, dict) and item:
                body = _yaml(item, indent + 1).lstrip("\n")
                out += f"\n{pad}- " + body[len("  " * (indent + 1)):]
            elif isinstance(item, list) and item:
                out += f"\n{pad}-" + _yaml(item, indent + 1)
            else:
                out += f"\n{pad}-" + (_yaml(item, indent + 1) if isinstance(item, (dict, list)) else f" {_scalar(item)}")
        return out
    return f" {_scalar(v)}"


def write_files(files: Mapping[Path, str], *, force: bool) -> list[Path]:
    """Write ``files`` (all or none; ``-o -``, printing them, is the command's). An existing file
    is kept unless ``force``; each write is atomic (temp file, fsync, rename)."""
    from envman.state import atomic_write

    existing = [p for p in files if p.exists()]
    if existing and not force:
        raise UserError(f"{existing[0]} exists", where="envman export", fix="pass --force to overwrite it, or -o another path")

    for p in files:
        if p.is_dir() or (p.parent.exists() and not p.parent.is_dir()):
            raise UserError(f"cannot write {p}: a directory is in the way", where="envman export", fix="choose another -o")
        mode = os.lstat(p).st_mode if os.path.lexists(p) else None
        if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            # the rename would replace a FIFO, a socket or a device node (/dev/null, for root) with a file
            raise UserError(f"cannot write {p}: it is not a regular file", where="envman export",
                            fix="choose another -o (or - to print it)")
    for p, text in files.items():
        atomic_write(p, text)
    return list(files)
