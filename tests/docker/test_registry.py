"""``envman push`` / ``envman pull`` / ``run`` pulling, against a real registry (Debian's
docker-registry on 127.0.0.1:5000) and the real engine.

What is a fixture: the promoted stack image. It is built here ``FROM`` the stand-in Debian root
filesystem with the labels ``envman build`` gives an image (``envman.stack`` is the JSON of the
stack this test's matrix resolves), and a smoke report is written for it (no probe ran). The
stack has a version unique to the session, so no other image on the shared engine is touched.
Everything else is real: the labelling build, the push, the registry's digest, the pull by
digest, the checks, the promotion and the ``docker run``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from envman.engine.context import deterministic_tar
from envman.state import stable_ref
from tests.support.rows import cpu_torch_matrix

pytestmark = [pytest.mark.docker, pytest.mark.registry]

VERSION = f"0.9.{int(uuid.uuid4().hex[:6], 16)}"
MATRIX = cpu_torch_matrix(VERSION, "test fixture: never installed")
STACK = f"torch-{VERSION}-cpu-py3.11"


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("matrix") / "torch.toml"
    path.write_text(MATRIX)
    return path


def envman(matrix: Path, home: Path, *args: str, cwd: Path | None = None, timeout: int = 600):
    env = {**os.environ, "ENVMAN_STATE_DIR": str(home / "state"), "ENVMAN_CONFIG_DIR": str(home / "config"),
           "ENVMAN_RUN_CACHE": "0"}
    env.pop("ENVMAN_MATRIX", None)
    return subprocess.run([sys.executable, "-m", "envman", "--matrix", str(matrix), *args], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=cwd, stdin=subprocess.DEVNULL)


def stack_obj(matrix: Path):
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve

    return resolve(load_matrix([matrix]), STACK)


def build_fixture_image(engine, standin, stack, test_labels, *, labels: dict[str, str] | None = None,
                        tag: str | None = None) -> str:
    """An image labelled like a promoted envman image of ``stack`` (FROM the stand-in rootfs),
    with the render hash a host with no network options gives the stack (what pull expects)."""
    from envman.images.build import expected_render_hashes
    from envman.render.dockerfile import stack_label_json
    from envman.render.options import RenderOptions

    base = standin.rootfs("bookworm")
    stack_json = stack_label_json(stack)
    all_labels = {
        "envman.managed": "true", "envman.name": stack.name, "envman.stack": stack_json,
        "envman.render-hash": min(expected_render_hashes(stack, RenderOptions())), "envman.role": "candidate",
        **test_labels, **(labels or {}),
    }
    ref = tag or stable_ref(stack)
    for _ in engine.build(deterministic_tar({"Dockerfile": f"FROM {base}\n".encode()}), ref, labels=all_labels):
        pass
    return engine.inspect_image(ref).id


def write_report(home: Path, stack_name: str, image_id: str, overall: str = "cpu-only") -> None:
    from envman.images.build import SmokeReport, save_report

    old = os.environ.get("ENVMAN_STATE_DIR")
    os.environ["ENVMAN_STATE_DIR"] = str(home / "state")
    try:
        save_report(SmokeReport(stack=stack_name, image=f"envman/{stack_name}:latest", image_id=image_id,
                                overall=overall, reason="test fixture: no probe was run", gpus_requested=False,
                                probe=None, exit_code=0, stderr_tail="", promoted=True))
    finally:
        if old is None:
            os.environ.pop("ENVMAN_STATE_DIR", None)
        else:
            os.environ["ENVMAN_STATE_DIR"] = old


def drop_repo_images(engine, *repos: str) -> None:
    """Remove every local tag and digest reference of these repositories (test-created only)."""
    for img in engine.list_images({"envman.name": STACK}):
        info = engine.inspect_image(img.id)
        refs = [*info.tags, *info.repo_digests] if info is not None else []
        for ref in refs:
            if any(ref.startswith(r + ":") or ref.startswith(r + "@") for r in repos):
                engine.remove_image(ref, force=True)


@pytest.fixture
def hosts(tmp_path):
    """Two envman homes (state + config): the pushing host and the pulling one."""
    out = {}
    for name in ("a", "b"):
        d = tmp_path / name
        (d / "state").mkdir(parents=True)
        (d / "config").mkdir()
        out[name] = d
    return out


def test_push_then_pull_on_another_host_then_run_pulls(docker_engine, standin, registry_server, matrix, hosts,
                                                       test_labels, test_session_id, tmp_path):
    stack = stack_obj(matrix)
    reg = f"{registry_server.host}/envman-test-{test_session_id}"
    repo = f"{reg}/envman/{stack.name}"
    local = f"envman/{stack.name}"
    try:
        promoted_id = build_fixture_image(docker_engine, standin, stack, test_labels)
        write_report(hosts["a"], stack.name, promoted_id)

        # Not promoted here yet (host b has no report): push refuses, one line, exit 2.
        r = envman(matrix, hosts["b"], "push", STACK, "--registry", reg)
        assert r.returncode == 2 and "smoke verdict" in r.stderr and r.stderr.count("\n") == 1, r.stderr

        r = envman(matrix, hosts["a"], "push", STACK, "--registry", reg)
        assert r.returncode == 0, r.stderr
        ref = r.stdout.strip()
        assert ref.startswith(repo + "@sha256:") and len(ref.split("@")[1]) == 71, ref
        digest = ref.split("@")[1]
        # The registry holds exactly that manifest under :latest (asked over its own HTTP API).
        assert registry_server.manifest_digest(f"envman-test-{test_session_id}/envman/{stack.name}", "latest") == digest
        # The pushed image is the promoted one plus the smoke verdict, nothing else.
        pushed = docker_engine.inspect_image(f"{repo}:latest")
        labels = pushed.labels
        assert labels["envman.smoke.status"] == "cpu-only" and labels["envman.smoke.image"] == promoted_id
        assert pushed.layers and pushed.layers == docker_engine.inspect_image(promoted_id).layers
        assert json.loads(labels["envman.stack"]) == json.loads(json.dumps(stack.to_json()))

        # Host b: nothing of the stack on the engine. Without a digest nothing vouches for the
        # registry's :latest (host b pushed nothing): refused, one line, nothing pulled.
        drop_repo_images(docker_engine, repo, local)
        assert docker_engine.inspect_image(stable_ref(stack)) is None
        r = envman(matrix, hosts["b"], "pull", STACK, "--registry", reg)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "nothing vouches" in r.stderr, r.stderr
        assert docker_engine.inspect_image(stable_ref(stack)) is None
        # With the digest host a's push printed, host b pulls exactly that.
        r = envman(matrix, hosts["b"], "pull", STACK, "--registry", reg, "--digest", digest)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == ref
        here = docker_engine.inspect_image(stable_ref(stack))
        assert here is not None and ref in here.repo_digests
        # The verdict came with the image (its labels, bound to its layers): host b has no report.
        assert not list((hosts["b"] / "state").rglob("reports/*.json"))
        assert here.labels["envman.smoke.status"] == "cpu-only"

        # A project on that stack runs on host b...
        proj = tmp_path / "proj"
        proj.mkdir()
        (proj / "envman.toml").write_text(f'stack = "{STACK}"\nname = "envman-test-pull"\n')
        hello = ["run", str(proj), "--no-gpu", "--", "sh", "-c", "echo hello-from-the-pulled-image"]
        r = envman(matrix, hosts["b"], *hello)
        assert r.returncode == 0 and "hello-from-the-pulled-image" in r.stdout, r.stderr

        # ... and where the image is missing, run fails unless pulling on run is switched on.
        drop_repo_images(docker_engine, repo, local)
        r = envman(matrix, hosts["b"], *hello)
        assert r.returncode == 1 and f"envman build {stack.name}" in r.stderr, r.stderr
        (hosts["b"] / "config" / "config.toml").write_text(f'[registry]\ndefault = "{reg}"\npull_on_run = true\n')
        r = envman(matrix, hosts["b"], *hello)
        assert r.returncode == 2 and "nothing vouches" in r.stderr, r.stderr  # still nobody's digest
        (hosts["b"] / "config" / "config.toml").write_text(
            f'[registry]\ndefault = "{reg}"\npull_on_run = true\ntrust_registry = true\n')
        r = envman(matrix, hosts["b"], *hello)
        assert r.returncode == 0 and "hello-from-the-pulled-image" in r.stdout, r.stderr
        assert f"pulled {ref}" in r.stderr and "labels only" in r.stderr
        assert ref in docker_engine.inspect_image(stable_ref(stack)).repo_digests
    finally:
        drop_repo_images(docker_engine, repo, local)


@pytest.mark.parametrize("case", ["tampered-stack", "no-smoke-label", "failed-smoke", "verdict-of-other-layers",
                                  "blank-rootfs", "other-render-hash"])
def test_pull_refuses_images_that_are_not_a_promoted_envman_image_of_the_stack(
        case, docker_engine, standin, registry_server, matrix, hosts, test_labels, test_session_id):
    from envman.images.store import rootfs_digest

    stack = stack_obj(matrix)
    reg = f"{registry_server.host}/envman-test-{test_session_id}-{case}"
    repo = f"{reg}/envman/{stack.name}"
    local = f"envman/{stack.name}"
    extra = {
        "tampered-stack": {"envman.smoke.status": "pass",
                           "envman.stack": json.dumps({**stack.to_json(), "python": "3.12"}, sort_keys=True)},
        "no-smoke-label": {},
        "failed-smoke": {"envman.smoke.status": "fail"},
        "verdict-of-other-layers": {"envman.smoke.status": "pass", "envman.smoke.rootfs": "sha256:" + "1" * 64},
        "blank-rootfs": {"envman.smoke.status": "pass", "envman.smoke.rootfs": ""},
        "other-render-hash": {"envman.smoke.status": "pass", "envman.render-hash": "b" * 64,
                              "envman.smoke.rootfs": rootfs_digest(docker_engine.inspect_image(standin.rootfs("bookworm")))},
    }[case]
    try:
        build_fixture_image(docker_engine, standin, stack, test_labels, labels=extra, tag=f"{repo}:latest")
        digest = docker_engine.push(f"{repo}:latest")
        drop_repo_images(docker_engine, repo)
        r = envman(matrix, hosts["b"], "pull", STACK, "--registry", reg, "--trust-registry")
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1 and "refused" in r.stderr, r.stderr
        assert {"tampered-stack": "envman.stack", "no-smoke-label": "envman.smoke.status",
                "failed-smoke": "smoke verdict is 'fail'",
                "verdict-of-other-layers": "not taken on these layers", "blank-rootfs": "not taken on these layers",
                "other-render-hash": "not what this host renders"}[case] in r.stderr
        assert docker_engine.inspect_image(stable_ref(stack)) is None  # not promoted
        assert docker_engine.inspect_image(f"{repo}@{digest}") is None  # and not left behind
    finally:
        drop_repo_images(docker_engine, repo, local)


def test_pull_of_a_digest_the_registry_lacks_fails_in_one_line(docker_engine, registry_server, matrix, hosts,
                                                               test_session_id):
    reg = f"{registry_server.host}/envman-test-{test_session_id}-missing"
    r = envman(matrix, hosts["b"], "pull", STACK, "--registry", reg, "--digest", "sha256:" + "0" * 64)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "pull" in r.stderr, r.stderr
    r = envman(matrix, hosts["b"], "pull", STACK, "--registry", reg, "--digest", "sha256:xyz")
    assert r.returncode == 2 and "--digest" in r.stderr, r.stderr


def _fake_framework_wheel(dest: Path, version: str) -> Path:
    """A pure-Python ``torch`` wheel of ``version`` (an empty package): the build's framework
    step installs it offline; the base image is what this test is about."""
    import zipfile

    name = f"torch-{version}-py3-none-any.whl"
    info = f"torch-{version}.dist-info"
    files = {"torch/__init__.py": f"__version__ = '{version}'\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: envman-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    with zipfile.ZipFile(dest / name, "w") as z:
        for n, text in files.items():
            z.writestr(n, text)
        z.writestr(f"{info}/RECORD", "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n")
    return dest / name


@pytest.mark.slow
def test_registry_mirror_builds_from_bases_pushed_to_a_real_registry(docker_engine, standin, registry_server, matrix,
                                                                     hosts, test_session_id, ca_bundle, tmp_path):
    """``--registry-mirror HOST/PREFIX``: the stand-in base is pushed into the registry under
    Docker Hub's name (``library/ubuntu``) and is NOT on the engine under the mirror's name;
    the build's FROM names the mirror, and the engine fetches the base from the registry."""
    stack = stack_obj(matrix)
    prefix = f"envman-test-{test_session_id}-mirror"
    mirror = f"{registry_server.host}/{prefix}"
    assert stack.base_image == "ubuntu:22.04"
    mirrored = f"{mirror}/library/ubuntu:22.04"
    standin(stack.base_image)
    docker_engine.tag(stack.base_image, mirrored)
    docker_engine.push(mirrored)
    docker_engine.remove_image(mirrored)
    assert docker_engine.inspect_image(mirrored) is None
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _fake_framework_wheel(wheels, VERSION)
    built = []
    try:
        r = envman(matrix, hosts["a"], "build", STACK, "--registry-mirror", mirror, "--offline", "--wheelhouse",
                   str(wheels), "--ca-bundle", ca_bundle, "--accept-cpu-only", "--json", timeout=1500)
        rows = json.loads(r.stdout or "[]")
        assert rows and rows[0].get("image_id"), (r.stdout[-2000:], r.stderr[-2000:])
        built.append(rows[0]["image_id"])
        # The engine asked the registry for the mirrored base (its access log), and the image is on it.
        assert f"/v2/{prefix}/library/ubuntu/manifests/22.04" in registry_server.access_log()
        dockerfile = (hosts["a"] / "state").rglob("*.log")
        assert any(f"FROM {mirrored}" in p.read_text(errors="replace") for p in dockerfile)
        # The FROM follows the mirror given (render needs no engine).
        r = envman(matrix, hosts["b"], "render", STACK, "--registry-mirror", f"{registry_server.host}/nowhere",
                   "--offline", "--wheelhouse", str(wheels), "-o", "-")
        assert r.returncode == 0 and f"FROM {registry_server.host}/nowhere/library/ubuntu:22.04" in r.stdout
    finally:
        for img in docker_engine.list_images({"envman.name": STACK}):
            for ref in img.tags or (img.id,):
                docker_engine.remove_image(ref, force=True)
        if docker_engine.inspect_image(mirrored) is not None:
            docker_engine.remove_image(mirrored, force=True)


#: Network options of the pushing host (each changes its render hash, none what the image is).
PUSHER_OPTIONS = {
    "pip_index": {"pip_index": "https://pypi.corp.example/simple"},
    "pip_extra_index": {"pip_extra_index": "https://extra.corp.example/simple"},
    "framework_index": {"framework_index": "https://mirror.corp.example/whl/cpu"},
    "registry_mirror": {"registry_mirror": "mirror.corp.example:5000"},
    "apt_mirror": {"apt_mirror": "https://apt.corp.example/debian"},
    "python_install_mirror": {"python_install_mirror": "https://py.corp.example/releases"},
}


@pytest.mark.parametrize("kind", sorted(PUSHER_OPTIONS))
def test_a_push_pull_round_trip_holds_whatever_network_option_the_pushing_host_built_with(
        docker_engine, standin, registry_server, matrix, hosts, test_labels, test_session_id, kind):
    """Host a built with ``kind`` (its render hash says so) and pushes; host b, with no network
    option, pulls by the digest a printed and promotes it: the content hash is the identity."""
    from envman.render.dockerfile import content_hash, render_stack
    from envman.render.options import RenderOptions

    stack = stack_obj(matrix)
    reg = f"{registry_server.host}/envman-test-{test_session_id}-{kind.replace('_', '-')}"
    repo = f"{reg}/envman/{stack.name}"
    local = f"envman/{stack.name}"
    built_with = render_stack(stack, RenderOptions(**PUSHER_OPTIONS[kind]))
    try:
        image = build_fixture_image(docker_engine, standin, stack, test_labels, labels={
            "envman.render-hash": built_with.render_hash, "envman.content-hash": content_hash(stack)})
        write_report(hosts["a"], stack.name, image)
        r = envman(matrix, hosts["a"], "push", STACK, "--registry", reg)
        assert r.returncode == 0, r.stderr
        digest = r.stdout.strip().split("@")[1]
        drop_repo_images(docker_engine, repo, local)
        r = envman(matrix, hosts["b"], "pull", STACK, "--registry", reg, "--digest", digest)
        assert r.returncode == 0, r.stderr
        here = docker_engine.inspect_image(stable_ref(stack))
        assert here is not None and f"{repo}@{digest}" in here.repo_digests
        assert here.labels["envman.render-hash"] == built_with.render_hash  # not what host b renders
    finally:
        drop_repo_images(docker_engine, repo, local)
