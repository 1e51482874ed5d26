"""Two real users on one Docker engine: builds, verdicts, pins and prune do not break each other.

The users are created here (``useradd``, in the docker group) and removed at the end; envman runs
as each of them through ``runuser`` with an interpreter they can execute. The stack is a stand-in
(see ``tests/support/multiuser.py``): its render is a tiny image with a stand-in probe, while the
build, the smoke verdict on the image, promotion, ``envman run`` and ``envman prune`` are real.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support.rows import cpu_torch_matrix
from tests.support.multiuser import STANDIN_DRIVER, TestUser, engine_users, require_user_tools, user_python

pytestmark = [pytest.mark.docker, pytest.mark.multiuser, pytest.mark.slow]

STACK_QUERY = "torch-0.0.9-cpu"
MATRIX = cpu_torch_matrix("0.0.9", "test fixture: the shared-engine tests' stand-in stack, never installed")


@pytest.fixture(scope="module")
def world(docker_engine, standin):
    require_user_tools("the multi-user tests create users")
    top = Path(tempfile.mkdtemp(prefix="envman-shared-"))
    top.chmod(0o755)
    try:
        python = user_python(top / "py")
        (top / "matrix.toml").write_text(MATRIX)
        (top / "driver.py").write_text(STANDIN_DRIVER)
        base = standin.rootfs("bookworm")
        with engine_users(("envmanu-a", "envmanu-b")) as (a, b):
            yield {"top": top, "python": str(python), "base": base, "a": a, "b": b}
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(scope="module")
def stack_repo(world, docker_engine):
    """The stand-in stack's repository; every image in it (and the project images) go at the end."""
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve

    name = resolve(load_matrix([str(world["top"] / "matrix.toml")]), STACK_QUERY).name
    repo = f"envman/{name}"
    yield repo
    for c in docker_engine.list_containers({"envman.name": name}):
        docker_engine.remove_container(c.id, force=True)
    for img in docker_engine.list_images({"envman.name": name}):
        for ref in img.tags or (img.id,):
            docker_engine.remove_image(ref, force=True)


def envman(world, user: TestUser, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return user.run([world["python"], "-m", "envman", "--matrix", str(world["top"] / "matrix.toml"), *args], cwd=cwd)


def build(world, user: TestUser, variant: str) -> dict:
    r = user.run([world["python"], str(world["top"] / "driver.py"), str(world["top"] / "matrix.toml"), STACK_QUERY,
                  variant, world["base"]])
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def plan_image(world, user: TestUser, project: str) -> tuple[str, str]:
    r = envman(world, user, "run", project, "--no-gpu", "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["plan"]["image"], r.stderr


def run_ok(world, user: TestUser, project: str, *extra: str) -> subprocess.CompletedProcess:
    r = envman(world, user, "run", project, "--no-gpu", *extra, "--", "sh", "-c", "echo ran as $(id -u)")
    assert r.returncode == 0 and f"ran as {user.uid}" in r.stdout, (r.stdout, r.stderr)
    return r


def add_project(world, user: TestUser, name: str) -> None:
    root = user.home / name
    r = user.run(["mkdir", "-p", str(root)])
    assert r.returncode == 0, r.stderr
    r = user.run(["sh", "-c", f"printf 'name = \"{name}\"\\nstack = \"{STACK_QUERY}\"\\ngpus = \"none\"\\n' > {root}/envman.toml"])
    assert r.returncode == 0, r.stderr
    r = envman(world, user, "project", "add", str(root))
    assert r.returncode == 0, r.stderr


def prune_ids(world, user: TestUser, *flags: str) -> set[str]:
    r = envman(world, user, "prune", "--json", *flags)
    assert r.returncode == 0, r.stderr
    return {row["image_id"] for row in json.loads(r.stdout)}


def test_two_users_build_run_promote_and_prune_on_one_engine(world, stack_repo, docker_engine):
    a, b = world["a"], world["b"]

    # A builds and runs: the verdict goes on the image, with who took it.
    first = build(world, a, "v1")
    assert first["smoked"] and first["promoted"] and first["overall"] == "pass"
    s1 = first["stable_id"]
    labels = docker_engine.inspect_image(s1).labels
    assert labels["envman.smoke.status"] == "pass" and labels["envman.smoke.by-user"] == a.name
    assert labels["envman.built-by.uid"] == str(a.uid)
    add_project(world, a, "se-proj-a")
    assert plan_image(world, a, "se-proj-a")[0] == s1  # pinned by id
    run_ok(world, a, "se-proj-a")

    # B builds the same stack: A's candidate is not taken for B's (anyone can tag an image with its
    # labels), so B builds and smoke-tests its own; B runs on it.
    same = build(world, b, "v1")
    assert not same["cached"] and same["smoked"] and same["promoted"] and same["stable_id"] != s1
    add_project(world, b, "se-proj-b")
    run_ok(world, b, "se-proj-b")

    # B promotes another build: A's run stays on its image and says, in one line, that a newer one exists.
    second = build(world, b, "v2")
    s2 = second["stable_id"]
    assert second["smoked"] and s2 != s1
    image, err = plan_image(world, a, "se-proj-a")
    assert image == s1
    notes = [ln for ln in err.splitlines() if "newer stable image" in ln]
    assert len(notes) == 1 and b.name in notes[0] and "--update" in notes[0], err
    run_ok(world, a, "se-proj-a")
    assert plan_image(world, b, "se-proj-b")[0] == s2  # B's own promotion moves B's project

    # B flips the stable tag to a third build and back: B's third build is B's alone to prune.
    s3 = build(world, b, "v3")["stable_id"]
    back = build(world, b, "v2")
    assert back["cached"] and not back["smoked"] and back["stable_id"] == s2
    assert plan_image(world, a, "se-proj-a")[0] == s1  # the flips did not move A

    # A moves to the new stable; a stopped container (anyone's) keeps A's old image from prune.
    run_ok(world, a, "se-proj-a", "--update")
    assert plan_image(world, a, "se-proj-a")[0] == s2
    holder = subprocess.run(["docker", "create", "--label", "envman.test-holder=1", s1, "true"],
                            capture_output=True, text=True, check=True).stdout.strip()
    try:
        would = prune_ids(world, a, "--dry-run")
        assert s1 not in would and s3 not in would and s2 not in would  # in use / B's / stable
        assert s3 in prune_ids(world, b, "--dry-run")  # B's own stale build is B's to prune
        assert world["a"].uid != 0
        r = envman(world, a, "prune", "--all-users")
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "only root" in r.stderr
    finally:
        subprocess.run(["docker", "rm", "-f", holder], capture_output=True)
    removed = prune_ids(world, a)
    assert s1 in removed and docker_engine.inspect_image(s1) is None

    # B still runs (on its pinned stable), and so does A.
    run_ok(world, b, "se-proj-b")
    run_ok(world, a, "se-proj-a")
    assert docker_engine.inspect_image(s3) is not None  # A's prune never touched B's image


#: ensure_base as the invoking user, for a tiny base whose recipe starts FROM the stand-in OS image.
BASE_DRIVER = r'''
import hashlib, json, sys
from envman.engine.builder import ClassicBuilder
from envman.engine.docker import Engine
from envman.images.base import ensure_base
from envman.render.base import BaseBuild

tag, base = sys.argv[1:3]
dockerfile = "FROM %s\nRUN echo recipe > /recipe.txt\n" % base
build = BaseBuild(tag=tag, ref="envman/base:" + tag, dockerfile=dockerfile,
                  recipe_hash=hashlib.sha256(dockerfile.encode()).hexdigest(), sources=("test @ 0",))
with Engine.connect() as engine:
    res = ensure_base(engine, ClassicBuilder(engine), build)
print(json.dumps({"cached": res.cached, "image_id": res.image_id, "recipe": build.recipe_hash}))
'''


def test_a_base_planted_under_envman_s_tag_with_its_labels_is_not_reused(world, docker_engine):
    """A neighbour builds an image with the base's recipe label (anyone can compute it) and tags it
    envman/base:<tag>: a user's build does not reuse it, and the base it gets has none of its files."""
    a, b = world["a"], world["b"]
    tag = "12.4.1-base-envmantest" + str(a.uid)
    ref = f"envman/base:{tag}"
    (world["top"] / "base_driver.py").write_text(BASE_DRIVER)
    (world["top"] / "base_driver.py").chmod(0o644)

    def ensure(user):
        r = user.run([world["python"], str(world["top"] / "base_driver.py"), tag, world["base"]])
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout.strip().splitlines()[-1])

    plant = world["top"] / "plant"
    plant.mkdir()
    try:
        recipe = ensure(a)["recipe"]  # A builds it once (and owns that image)
        (plant / "Dockerfile").write_text(f"FROM {world['base']}\nRUN echo planted > /planted.txt\n")
        subprocess.run(["docker", "build", "-q", "-t", ref, "--label", f"envman.base.recipe={recipe}", "--label",
                        "envman.role=base", "--label", "envman.managed=true", str(plant)],
                       check=True, capture_output=True, timeout=600)
        planted = docker_engine.inspect_image(ref).id
        for user in (a, b):  # the user who built the base before, and one who never did
            got = ensure(user)
            assert not got["cached"] and got["image_id"] != planted, user.name
            seen = subprocess.run(["docker", "run", "--rm", got["image_id"], "sh", "-c",
                                   "cat /recipe.txt; test ! -e /planted.txt"], capture_output=True, text=True)
            assert seen.returncode == 0 and seen.stdout == "recipe\n", (user.name, seen.stdout, seen.stderr)
            again = ensure(user)
            assert again["cached"] and again["image_id"] == got["image_id"]
    finally:
        for img in docker_engine.list_images({"envman.name": f"nvidia/cuda:{tag}"}):
            docker_engine.remove_image(img.id, force=True)
        subprocess.run(["docker", "rmi", "-f", ref], capture_output=True)
