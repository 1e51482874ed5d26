"""Bases NVIDIA deleted, rebuilt from its recipes: the data (matrices/recipes.toml), the rules
`matrix validate` holds it to, the Dockerfile it renders, and how a build chooses a base."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from envman.errors import UserError
from envman.matrix.load import load_files, load_matrix
from envman.matrix.validate import validate
from envman.render.base import BASE_REPOSITORY, base_line, rebuilt_base, render_base
from envman.render.dockerfile import render_stack, verify_context
from envman.stack.resolve import resolve, resolve_row
from tests.unit.matrix.test_recipes import GOOD

ROOT = Path(__file__).resolve().parents[3]
RECIPES = ROOT / "matrices" / "recipes.toml"
needs_shipped = pytest.mark.skipif(not RECIPES.exists(), reason="shipped matrix not present")


@pytest.fixture(scope="module")
def shipped():
    return load_matrix()


# --- the shipped data --------------------------------------------------------------------------


@needs_shipped
def test_every_shipped_recipe_parses_and_its_chain_reaches_plain_ubuntu(shipped):
    assert len(shipped.recipes) >= 100
    for r in shipped.recipes:
        chain = shipped.recipe_chain(r.tag, r.platform)
        assert chain is not None and chain[-1] is r, r.tag
        assert chain[0].from_image.startswith("ubuntu:") and all(c.from_image is None for c in chain[1:]), r.tag
        assert re.fullmatch(r"[0-9a-f]{40}", r.commit) and r.path.endswith("/Dockerfile") and r.source, r.tag
        for d in r.downloads:
            assert re.fullmatch(r"[0-9a-f]{64}", d.sha256), (r.tag, d.url)


@needs_shipped
def test_every_row_and_platform_builds_from_an_image_that_is_served(shipped):
    """The FROM chain of every stack ends at a served image: the stack's own base, or the plain
    Ubuntu image its rebuilt base starts from. 0 rows stand on a base that is neither."""
    rebuilt = 0
    for b in shipped.builds:
        for plat in b.platforms:
            stack = resolve_row(shipped, b, plat)
            base = rebuilt_base(shipped, stack)
            ctx = render_stack(stack, None, probe=b"p", base=base)
            first_from = re.search(r"^FROM (?:--platform=\S+ )?(\S+)", ctx.dockerfile, re.M).group(1)
            if base is None:
                img = next(i for i in shipped.images if i.ref == stack.base_image)
                assert img.status == "published" or img.custom, (stack.name, img.ref, img.status)
                assert first_from == stack.base_image
                assert "base/Dockerfile" not in ctx.files
            else:
                rebuilt += 1
                assert first_from == base.ref == f"{BASE_REPOSITORY}:{stack.base_image.split(':', 1)[1]}"
                assert ctx.files["base/Dockerfile"] == base.dockerfile.encode()
                froms = re.findall(r"^FROM (\S+)", base.dockerfile, re.M)
                assert froms[0].startswith("ubuntu:") and stack.base_image_status != "published"
    assert rebuilt >= 40  # every CUDA 9.0-10.2 stack


@needs_shipped
def test_the_missions_own_stack_is_rebuilt_from_nvidias_recipe(shipped):
    stack = resolve(shipped, "torch-1.0-cuda10")
    base = rebuilt_base(shipped, stack)
    assert base is not None and base.ref == "envman/base:10.0-base-ubuntu18.04"
    text = base.dockerfile
    # NVIDIA's own pins, repository (its ubuntu1804 path) and ENV block
    assert "cuda-cudart-10-0=10.0.130-1 cuda-compat-10-0" in text
    assert "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] https://developer.download.nvidia.com/compute/cuda/repos/ubuntu1804/x86_64 /" in text
    for env in ('CUDA_VERSION="10.0.130"', 'NVIDIA_REQUIRE_CUDA="cuda>=10.0 brand=tesla,driver>=384,driver<385"',
                'NVIDIA_VISIBLE_DEVICES="all"', 'NVIDIA_DRIVER_CAPABILITIES="compute,utility"',
                'PATH="/usr/local/nvidia/bin:/usr/local/cuda/bin:${PATH}"'):
        assert env in text, env
    # the rotated key, by fingerprint, never apt-key
    assert "EB693B3035CD5710E231E123A4B469963BF863CC" in text and "3bf863cc.pub" in text
    runs = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    assert "apt-key" not in runs and "7fa2af80" not in runs
    assert text.count("rm -rf") >= 2 and "/var/lib/apt/lists/*" in text


@needs_shipped
def test_a_cudnn_recipe_checks_its_download_against_nvidias_sha256(shipped):
    stack = resolve(shipped, "tf-1.12-cuda9")  # TensorFlow on the 9.0 cuDNN image: base -> runtime -> cudnn7
    base = rebuilt_base(shipped, stack)
    chain = shipped.recipe_chain(stack.base_image.split(":", 1)[1])
    assert [r.tag.split("-", 1)[1] for r in chain] == ["base-ubuntu16.04", "runtime-ubuntu16.04", "cudnn7-runtime-ubuntu16.04"]
    assert base.dockerfile.count("\nFROM ") + base.dockerfile.startswith("FROM ") == 3
    ten = resolve(shipped, "torch-1.0-cuda10-cudnn-runtime")
    text = rebuilt_base(shipped, ten).dockerfile
    assert "a7e21448181bf69b2f4b9fb3e8c8bdfd962e327b1716d34608488641b4199bb2" in text  # libcudnn7 7.6.5.32 for 10.0
    assert "sha256sum -c --strict" in text and "refusing it" in text


# --- matrix validate: one rule each ---------------------------------------------------------------


@needs_shipped
def test_shipped_matrix_has_no_recipe_problem(shipped):
    assert [str(p) for p in validate(shipped) if p.where.startswith("recipe") or "recipe" in p.what] == []


def _one_recipe(shipped, tag: str, **change):
    return replace(shipped, recipes=tuple(replace(r, **change) if r.tag == tag else r for r in shipped.recipes))


@needs_shipped
@pytest.mark.parametrize("change, says", [
    ({"packages": ("cuda-cudart-10-1=10.1.243-1",)}, "installs no cuda-cudart-10-0 package"),
    ({"env": (("CUDA_VERSION", "10.1.243"),)}, "CUDA_VERSION '10.1.243' is not a CUDA 10.0 release"),
    ({"parent": "10.0-nonexistent-ubuntu18.04", "from_image": None}, "its parent chain is broken"),
])
def test_a_recipe_that_disagrees_with_its_image_row_is_a_problem(shipped, change, says):
    m = _one_recipe(shipped, "10.0-base-ubuntu18.04", **change)
    assert any(says in p.what for p in validate(m) if p.where == "recipe nvidia/cuda:10.0-base-ubuntu18.04 (linux/amd64)")


@needs_shipped
def test_a_cudnn_recipe_without_its_cudnn_is_a_problem(shipped):
    tag = "10.0-cudnn7-runtime-ubuntu18.04"
    m = _one_recipe(shipped, tag, packages=("libcudnn8=8.0.5.39-1+cuda10.0",))
    assert any("installs no libcudnn7" in p.what for p in validate(m) if p.where.startswith(f"recipe nvidia/cuda:{tag}"))


@needs_shipped
def test_a_recipe_for_a_tag_nvidia_never_published_is_a_problem(shipped):
    r = shipped.recipe("10.0-base-ubuntu18.04")
    m = replace(shipped, recipes=shipped.recipes + (replace(r, tag="10.0-base-ubuntu17.10"),))
    assert [p.what for p in validate(m) if p.where == "recipe nvidia/cuda:10.0-base-ubuntu17.10 (linux/amd64)"] == [
        'rebuilds a tag NVIDIA never published (kind = "tags")']


@needs_shipped
@pytest.mark.parametrize("first", [
    {"parent": "10.0-nonexistent-ubuntu18.04", "from_image": None},  # a broken chain
    {},  # a tag no image row describes (nothing to compare its packages with)
])
def test_every_recipe_is_checked_after_one_that_cannot_be(shipped, first):
    r = shipped.recipe("10.0-base-ubuntu18.04")
    odd = replace(r, tag="10.0-base-ubuntu17.10", **first)
    m = _one_recipe(replace(shipped, recipes=(odd,) + shipped.recipes), "10.0-base-ubuntu18.04", env=())
    assert [p.what.split(" (the image row")[0] for p in validate(m)
            if p.where == "recipe nvidia/cuda:10.0-base-ubuntu18.04 (linux/amd64)"] == [
        "CUDA_VERSION '' is not a CUDA 10.0 release"]


@needs_shipped
def test_a_row_whose_deleted_base_loses_its_recipe_is_a_problem(shipped):
    m = replace(shipped, recipes=tuple(r for r in shipped.recipes if not r.tag.startswith("10.0-")))
    problems = [p for p in validate(m) if "can be rebuilt from NVIDIA's recipe" in p.what]
    assert any(p.where == "torch 1.0.1 cu100" for p in problems)


# --- choosing a base: --base auto | pull | rebuild ------------------------------------------------


def test_auto_rebuilds_a_deleted_base_and_pulls_a_served_one(mini):
    old, new = resolve(mini, "torch-1.0-cuda10"), resolve(mini, "torch-2.4-cuda12")
    assert rebuilt_base(mini, old).ref == "envman/base:10.0-base-ubuntu18.04"
    assert rebuilt_base(mini, new) is None
    assert rebuilt_base(mini, resolve(mini, "torch-2.4-cpu")) is None  # plain ubuntu: nothing to rebuild


def test_a_registry_mirror_wins_in_auto_and_pull_never_rebuilds(mini):
    old = resolve(mini, "torch-1.0-cuda10")
    assert rebuilt_base(mini, old, registry_mirror="mirror.example:5000") is None
    assert rebuilt_base(mini, old, "pull") is None
    assert "--base pull will likely fail" in base_line(old, None, "pull")
    assert base_line(old, None, "pull", registry_mirror="mirror.example:5000") is None
    assert "rebuilding it from NVIDIA's recipe as envman/base:10.0-base-ubuntu18.04" in base_line(old, rebuilt_base(mini, old))


def test_rebuild_rebuilds_a_served_base_with_a_recipe_and_refuses_one_without(mini):
    old = resolve(mini, "torch-1.0-cuda10")
    served = replace(old, base_image_status="published")
    assert rebuilt_base(mini, served, "rebuild").ref == "envman/base:10.0-base-ubuntu18.04"
    assert rebuilt_base(mini, served, "auto") is None
    with pytest.raises(UserError, match="no recipe rebuilds nvidia/cuda:12.4.1-base-ubuntu22.04"):
        rebuilt_base(mini, resolve(mini, "torch-2.4-cuda12"), "rebuild")
    with pytest.raises(UserError, match="is not one of auto, pull, rebuild"):
        rebuilt_base(mini, old, "always")


def test_a_custom_base_is_never_rebuilt(mini):
    old = replace(resolve(mini, "torch-1.0-cuda10"), base_image_custom=True)
    assert rebuilt_base(mini, old, "rebuild") is None


def test_the_base_is_part_of_the_stack_context_and_its_hash(mini, tmp_path):
    old = resolve(mini, "torch-1.0-cuda10")
    base = rebuilt_base(mini, old)
    with_base = render_stack(old, None, probe=b"p", base=base)
    pulled = render_stack(old, None, probe=b"p")
    assert with_base.render_hash != pulled.render_hash
    assert "FROM envman/base:10.0-base-ubuntu18.04\n" in with_base.dockerfile
    assert "FROM nvidia/cuda:10.0-base-ubuntu18.04\n" in pulled.dockerfile
    verify_context(with_base.write(tmp_path / "ctx"))
    assert (tmp_path / "ctx" / "base" / "Dockerfile").read_text() == base.dockerfile
    # a changed recipe is a new base and so a new stack image; an unchanged one is the same
    chain = mini.recipe_chain("10.0-base-ubuntu18.04")
    again = render_base(chain)
    changed = render_base((replace(chain[0], packages=chain[0].packages + ("cuda-nvtx-10-0=10.0.130-1",)),))
    assert again.recipe_hash == base.recipe_hash and changed.recipe_hash != base.recipe_hash


def test_the_base_dockerfile_names_its_source_and_follows_the_mirrors(mini, tmp_path):
    chain = mini.recipe_chain("10.0-base-ubuntu18.04")
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    b = render_base(chain, registry_mirror="mirror.example:5000", apt_mirror="http://apt.example/ubuntu", ca_bundle=ca)
    assert "\nFROM mirror.example:5000/library/ubuntu:18.04 AS " in "\n" + b.dockerfile
    assert "#http://apt.example/ubuntu#' /etc/apt/sources.list" in b.dockerfile
    assert "--cacert /usr/local/share/ca-certificates/envman-ca.crt" in b.dockerfile
    assert dict(b.files)["envman-ca.crt"] == ca.read_bytes()
    assert f"{chain[0].path} @ {chain[0].commit[:12]}" in b.dockerfile
    assert not re.search(r"^#\s*syntax\s*=", b.dockerfile, re.M)


def test_load_files_later_recipe_replaces_earlier(tmp_path):
    a = tmp_path / "a.toml"
    b = tmp_path / "b.toml"
    a.write_text(GOOD)
    b.write_text(GOOD.replace('"cuda-compat-10-0"', '"cuda-compat-10-0", "cuda-nvtx-10-0"'))
    m = load_files([a, b])
    assert len(m.recipes) == 1 and m.recipes[0].packages[-1] == "cuda-nvtx-10-0"


# --- prune: a rebuilt base goes with the last image built on it ------------------------------------


def _row(stack, image_id, *, role="candidate", base_recipe="r1", uid=1000, stable=False):
    from envman.images.prune import ImageRow

    return ImageRow(stack=stack, tags=(f"{stack}:{image_id}",), image_id=image_id, size=1, created=1, stable=stable,
                    smoke="pass", built_by_uid=uid, role=role, base_recipe=base_recipe)


@pytest.mark.parametrize("child_stable, child_uid, base_goes", [
    (False, 1000, True),   # the user's only image on the base goes: the base goes with it
    (True, 1000, False),   # the stack on it stays (stable): the base stays
    (False, 2000, False),  # another user's image is on it: it stays, and so does the base
])
def test_prune_keeps_a_base_while_an_image_on_it_stays(child_stable, child_uid, base_goes):
    from envman.images.prune import PruneScope, prune_selection

    base = _row("nvidia/cuda:10.0-base-ubuntu18.04", "b", role="base")
    child = _row("torch-1.0.1-cuda10.0-py3.6", "c", stable=child_stable, uid=child_uid)
    other = _row("torch-2.4.1-cpu-py3.10", "o", base_recipe=None)
    chosen = {r.image_id for r in prune_selection([base, child, other], PruneScope(uid=1000))}
    assert ("b" in chosen) == base_goes and "o" in chosen


def test_prune_keeps_a_base_another_user_built():
    from envman.images.prune import PruneScope, prune_selection

    base = _row("nvidia/cuda:10.0-base-ubuntu18.04", "b", role="base", uid=2000)
    assert prune_selection([base], PruneScope(uid=1000)) == []
    assert [r.image_id for r in prune_selection([base], PruneScope(uid=1000, all_users=True))] == ["b"]
