"""The platform dimension: linux/amd64 and linux/arm64 rows, names, resolution, render and build.

Two matrices: ``arm`` (the mini matrix plus TOML overlays, through the loader) and ``arm_mini``
(the mini matrix with one row and its base image given arm64 in memory), where exactly one
platform fact differs per test: the grammar's platform part, the resolver's choice of rows and
images per platform, the notes and sources a non-default platform adds, the validator's rules."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version

from envman.errors import MatrixError, ResolveError, UserError
from envman.matrix.load import load_matrix
from envman.matrix.model import Arch, Matrix
from envman.matrix.validate import validate
from envman.render.dockerfile import render_stack
from envman.stack.resolve import resolve, resolve_row
from envman.stack.names import DEFAULT_PLATFORM, Stack, parse_name, parse_platform

from tests.unit.conftest import MINI
from tests.unit.render.test_dockerfile import PROBE, make_stack

# Overlay on the mini matrix: the 12.4.1 base image and torch 2.4.1 cu124 gain arm64; a 2.5.0
# cu124 row exists for amd64 only; a CPU image and build for arm64 (partially confirmed).
OVERLAY = """
schema = 1
kind = "images"

[[image]]
repository = "nvidia/cuda"
tag = "12.4.1-base-ubuntu22.04"
cuda = "12.4.1"
flavour = "base"
os = "ubuntu22.04"
status = "published"
source = ["test"]
platforms = ["linux/arm64", "linux/amd64"]
platform_source = ["image-arm64-source"]
"""

BUILDS = """
schema = 1
kind = "framework"
framework = "torch"

[[build]]
version = "2.4.1"
variant = "cu124"
cuda = "12.4"
python = ["3.8", "3.9", "3.10", "3.11", "3.12"]
packages = ["torch==2.4.1"]
sass = ["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"]
ptx = ["9.0"]
default = true
source = ["test"]
status = "confirmed"
platforms = ["linux/amd64", "linux/arm64"]
platform_status = "partially confirmed"
platform_source = ["wheel-arm64-source"]
platform_note = "arm64 wheels: see the source"

[[build]]
version = "2.5.0"
variant = "cu124"
cuda = "12.4"
python = ["3.9", "3.10"]
packages = ["torch==2.5.0"]
sass = ["8.0", "9.0"]
default = true
source = ["test"]
status = "confirmed"
"""


@pytest.fixture()
def arm(tmp_path: Path):
    (tmp_path / "img.toml").write_text(OVERLAY)
    (tmp_path / "fw.toml").write_text(BUILDS)
    return load_matrix([*MINI, tmp_path / "img.toml", tmp_path / "fw.toml"], shipped=False)


# --- schema -----------------------------------------------------------------------------------


def test_rows_without_platforms_are_amd64_only(mini):
    assert all(b.platforms == ("linux/amd64",) for b in mini.builds)
    assert all(i.platforms == ("linux/amd64",) for i in mini.images)


def test_platforms_are_parsed_in_canonical_order(arm):
    img = next(i for i in arm.images if i.tag == "12.4.1-base-ubuntu22.04")
    assert img.platforms == ("linux/amd64", "linux/arm64") and img.platform_status == "confirmed"
    b = next(b for b in arm.builds if str(b.version) == "2.4.1" and b.variant == "cu124")
    assert b.platforms == ("linux/amd64", "linux/arm64") and b.platform_status == "partially confirmed"


@pytest.mark.parametrize(
    "value",
    ['["linux/arm"]', '[]', '["linux/arm64", "linux/arm64"]', '"linux/arm64"', '["arm64"]'],
)
def test_bad_platforms_are_rejected_naming_the_key(tmp_path, value):
    f = tmp_path / "bad.toml"
    f.write_text(OVERLAY.replace('["linux/arm64", "linux/amd64"]', value))
    with pytest.raises(MatrixError, match=r"image\[0\]\.platforms: expected a non-empty list"):
        load_matrix([f], shipped=False)


def test_wheel_python_is_parsed_and_names_normalised(tmp_path):
    f = tmp_path / "fw.toml"
    f.write_text(BUILDS.replace('platform_status = "partially confirmed"',
                                'wheel_python = { torch = ["3.8", "3.12"], Torch_Vision = ["3.9"] }'))
    b = next(b for b in load_matrix([f], shipped=False).builds if str(b.version) == "2.4.1")
    assert dict(b.wheel_python) == {
        "torch": tuple(sorted(__import__("packaging.version").version.Version(v) for v in ("3.8", "3.12"))),
        "torch-vision": (__import__("packaging.version").version.Version("3.9"),),
    }
    f.write_text(BUILDS.replace('platform_status = "partially confirmed"', 'wheel_python = { torch = [] }'))
    with pytest.raises(MatrixError, match=r"wheel_python"):
        load_matrix([f], shipped=False)


# --- names ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, platform",
    [
        ("torch-2.4-cuda12-arm64", "linux/arm64"),
        ("torch-2.4-cuda12-py3.10-devel-aarch64", "linux/arm64"),
        ("torch-2.4-AMD64", "linux/amd64"),
        ("torch-2.4-x86_64", "linux/amd64"),
        ("torch-2.4-cpu", None),
    ],
)
def test_name_grammar_has_an_optional_platform_part(name, platform):
    assert parse_name(name).platform == platform


@pytest.mark.parametrize("bad", ["torch-2.4-arm64-cuda12", "torch-2.4-arm", "torch-2.4-linux/arm64", "torch-2.4-arm64-arm64"])
def test_platform_part_must_come_last_and_be_known(bad):
    with pytest.raises(ResolveError, match="cannot parse stack name"):
        parse_name(bad)


def test_parse_platform_accepts_oci_and_short_forms():
    assert parse_platform("linux/arm64") == parse_platform("aarch64") == "linux/arm64"
    assert parse_platform("LINUX/AMD64") == "linux/amd64"
    for bad in ("linux/arm", "windows/amd64", "", "arm64;rm"):
        with pytest.raises(UserError, match="unknown platform"):
            parse_platform(bad)


# --- resolution -------------------------------------------------------------------------------


def test_platform_sources_and_notes_reach_only_the_arm64_stack(arm):
    s = resolve(arm, "torch-2.4-cuda12-arm64")
    assert {"image-arm64-source", "wheel-arm64-source"} <= set(s.sources)
    assert "arm64 wheels: see the source" in s.notes
    a = resolve(arm, "torch-2.4-cuda12")
    assert not {"image-arm64-source", "wheel-arm64-source"} & set(a.sources)
    assert "arm64 wheels: see the source" not in a.notes


def test_validate_wants_a_source_for_platforms_beyond_amd64(tmp_path):
    from envman.matrix.validate import validate

    (tmp_path / "img.toml").write_text(OVERLAY.replace('platform_source = ["image-arm64-source"]\n', ""))
    (tmp_path / "fw.toml").write_text(BUILDS.replace('platform_source = ["wheel-arm64-source"]\n', ""))
    m = load_matrix([*MINI, tmp_path / "img.toml", tmp_path / "fw.toml"], shipped=False)
    assert sorted(str(p) for p in validate(m)) == [
        "image nvidia/cuda:12.4.1-base-ubuntu22.04: platforms beyond linux/amd64 need a platform_source",
        "torch 2.4.1 cu124: platforms beyond linux/amd64 need a platform_source",
    ]


def test_arm64_stack_gets_suffix_platform_and_arm64_image(arm):
    s = resolve(arm, "torch-2.4-cuda12-arm64")
    assert s.platform == "linux/arm64"
    assert s.name == "torch-2.4.1-cuda12.4-py3.10-arm64"
    assert s.base_image == "nvidia/cuda:12.4.1-base-ubuntu22.04"
    assert any("linux/arm64 support of torch-2.4.1-cuda12.4 wheels is partially confirmed" in n for n in s.notes)
    assert resolve(arm, s.name) == s  # canonical names resolve to themselves
    assert resolve(arm, "torch-2.4-cuda12", "linux/arm64") == s


def test_amd64_resolution_is_unchanged_by_the_platform_dimension(arm, mini):
    a = resolve(arm, "torch-2.4-cuda12")
    assert a.platform == "linux/amd64" and not a.name.endswith("64")
    assert a == resolve(arm, "torch-2.4-cuda12-amd64") == resolve(arm, "torch-2.4-cuda12", "linux/amd64")
    assert "platform" not in a.to_json()  # amd64 JSON (labels, stack.json) as before platforms


def test_newest_release_with_the_platform_wins(arm):
    assert resolve(arm, "torch-2-cuda12").framework_version == "2.5.0"
    assert resolve(arm, "torch-2-cuda12-arm64").framework_version == "2.4.1"


def test_row_without_arm64_says_so_naming_its_platforms(arm):
    with pytest.raises(ResolveError) as exc:
        resolve(arm, "torch-2.5-cuda12-arm64")
    line = exc.value.line()
    assert "\n" not in line
    assert "torch 2.5 has no linux/arm64 build" in line and "linux/amd64 only" in line
    with pytest.raises(ResolveError, match="has no linux/arm64 build .*it has linux/amd64"):
        resolve_row(arm, next(b for b in arm.builds if str(b.version) == "2.5.0"), "linux/arm64")


def test_arm64_row_needs_an_arm64_base_image(arm):
    # torch 2.4.1 cu118 has no arm64 wheels; CPU rows have no arm64 ubuntu image in the mini matrix
    with pytest.raises(ResolveError, match="has no linux/arm64 build"):
        resolve(arm, "torch-2.4-cu118-arm64")
    cpu = next(b for b in arm.builds if b.cuda is None)
    arm_cpu = type(cpu)(**{**cpu.__dict__, "platforms": ("linux/amd64", "linux/arm64")})
    m = type(arm)(**{**arm.__dict__, "builds": tuple(b for b in arm.builds if b is not cpu) + (arm_cpu,)})
    with pytest.raises(ResolveError, match=r"no CPU base image on linux/arm64 in the matrix for torch-2.4.1-cpu"):
        resolve(m, "torch-2.4-cpu-arm64")


def test_conflicting_platforms_are_an_error(arm):
    with pytest.raises(ResolveError, match="names platform linux/arm64, --platform says linux/amd64"):
        resolve(arm, "torch-2.4-cuda12-arm64", "linux/amd64")


def test_stack_json_round_trip_keeps_the_platform(arm):
    s = resolve(arm, "torch-2.4-cuda12-arm64")
    d = json.loads(json.dumps(s.to_json()))
    assert d["platform"] == "linux/arm64"
    assert Stack.from_json(d) == s
    a = resolve(arm, "torch-2.4-cuda12")
    assert Stack.from_json(a.to_json()).platform == "linux/amd64"


# --- render and build -------------------------------------------------------------------------


def test_render_pins_from_platform_only_for_arm64():
    amd = render_stack(make_stack(), probe=PROBE).dockerfile
    assert "--platform" not in amd
    arm_stack = make_stack(name="torch-2.4.1-cuda12.4-py3.10-arm64", platform="linux/arm64")
    arm_df = render_stack(arm_stack, probe=PROBE).dockerfile
    froms = [line for line in arm_df.splitlines() if line.startswith("FROM ")]
    assert froms == ["FROM --platform=linux/arm64 nvidia/cuda:12.4.1-base-ubuntu22.04"]


def test_render_refuses_an_unknown_platform_from_a_cached_stack():
    from envman.errors import RenderError

    with pytest.raises(RenderError, match="platform"):
        render_stack(make_stack(platform="linux/arm64 --evil"), probe=PROBE)


def test_build_passes_the_platform_to_the_engine_only_for_arm64(tmp_path, monkeypatch):
    from envman.images.build import build_stack

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    from tests.support.fake_engine import FakeEngine

    eng = FakeEngine()
    build_stack(eng, make_stack(name="torch-2.4.1-cuda12.4-py3.10-arm64", platform="linux/arm64"))
    build_stack(eng, make_stack())
    assert [c["platform"] for c in eng.build_calls] == ["linux/arm64", None]


# --- CLI --------------------------------------------------------------------------------------


def _cli(args, files):
    from tests.unit.rules.test_cli_contract import envman

    p = envman(*args, env={"ENVMAN_MATRIX": ":".join(str(f) for f in files), "COLUMNS": "200"})
    return _Result(p.returncode, p.stdout + p.stderr, p.stdout)


class _Result:
    def __init__(self, code: int, output: str, stdout: str) -> None:
        self.exit_code, self.output, self.stdout = code, output, stdout


def test_cli_ls_filters_and_shows_platforms_and_show_prints_the_platform(tmp_path):
    (tmp_path / "fw.toml").write_text(BUILDS)
    (tmp_path / "img.toml").write_text(OVERLAY)
    files = [tmp_path / "img.toml", tmp_path / "fw.toml"]
    r = _cli(["matrix", "ls", "--platform", "linux/arm64", "--json"], files)
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert rows and all("linux/arm64" in d["platforms"] for d in rows)
    assert {d["name"] for d in rows} >= {"torch-2.4.1-cuda12.4"}
    r = _cli(["matrix", "show", "torch-2.4.1-cuda12.4-arm64"], files)
    assert r.exit_code == 0, r.output
    assert "linux/arm64" in r.output
    r = _cli(["matrix", "ls", "--platform", "sparc"], files)
    assert r.exit_code == 2 and "unknown platform 'sparc'" in r.output


def test_cli_render_platform_option_and_the_clear_error(tmp_path):
    (tmp_path / "fw.toml").write_text(BUILDS)
    (tmp_path / "img.toml").write_text(OVERLAY)
    files = [tmp_path / "img.toml", tmp_path / "fw.toml"]
    r = _cli(["render", "torch-2.4.1-cuda12.4", "--platform", "linux/arm64", "-o", "-"], files)
    assert r.exit_code == 0, r.output
    assert "FROM --platform=linux/arm64 nvidia/cuda:12.4.1-base-ubuntu22.04" in r.output
    r = _cli(["render", "torch-2.5.0-cuda12.4", "--platform", "linux/arm64", "-o", "-"], files)
    assert r.exit_code == 2
    assert "has no linux/arm64 build" in r.output and "Traceback" not in r.output


# --- per-platform arch lists and validation -----------------------------------------------------


def test_arm64_arch_lists_replace_the_amd64_ones_on_arm64(tmp_path):
    (tmp_path / "img.toml").write_text(OVERLAY)
    (tmp_path / "fw.toml").write_text(BUILDS.replace(
        'platform_status = "partially confirmed"',
        'platform_status = "partially confirmed"\nsass_arm64 = ["9.0", "8.0"]\nptx_arm64 = ["9.0"]'))
    m = load_matrix([*MINI, tmp_path / "img.toml", tmp_path / "fw.toml"], shipped=False)
    arm_stack = resolve(m, "torch-2.4-cuda12-arm64")
    assert arm_stack.sass_archs == ("8.0", "9.0") and arm_stack.ptx_archs == ("9.0",)
    amd_stack = resolve(m, "torch-2.4-cuda12")
    assert amd_stack.sass_archs == ("5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0")


def test_validate_flags_an_arm64_row_without_an_arm64_base_image(tmp_path):
    from envman.matrix.validate import validate

    (tmp_path / "fw.toml").write_text(BUILDS)  # 2.4.1 cu124 claims arm64; the mini 12.4.1 image is amd64 only
    m = load_matrix([*MINI, tmp_path / "fw.toml"], shipped=False)
    problems = [str(p) for p in validate(m)]
    assert problems == ["torch 2.4.1 cu124: no base base image for CUDA 12.4 on linux/arm64 (the row lists linux/arm64)"]
    (tmp_path / "img.toml").write_text(OVERLAY)
    m = load_matrix([*MINI, tmp_path / "img.toml", tmp_path / "fw.toml"], shipped=False)
    assert validate(m) == []


def test_validate_flags_arm64_archs_on_a_row_without_arm64(tmp_path):
    from envman.matrix.validate import validate

    (tmp_path / "fw.toml").write_text(BUILDS.replace('cuda = "12.4"\npython = ["3.9", "3.10"]',
                                                     'cuda = "12.4"\npython = ["3.9", "3.10"]\nsass_arm64 = ["9.0"]'))
    m = load_matrix([*MINI, tmp_path / "fw.toml"], shipped=False)
    assert any("sass_arm64/ptx_arm64 given but linux/arm64 is not in platforms" in str(p) for p in validate(m))


def test_shipped_matrix_has_arm64_stacks_that_resolve():
    from envman.matrix.load import load_matrix as load

    m = load()
    arm_rows = [b for b in m.builds if "linux/arm64" in b.platforms]
    assert arm_rows, "the shipped matrix has arm64 rows"
    for b in arm_rows:
        s = resolve_row(m, b, "linux/arm64")
        assert s.name.endswith("-arm64") and s.platform == "linux/arm64"
        img = next(i for i in m.images if i.ref == s.base_image)
        assert "linux/arm64" in img.platforms
    with pytest.raises(ResolveError, match="has no linux/arm64 build"):
        resolve(m, "torch-1.0-cuda10-arm64")


def test_ci_plan_platform_selects_and_resolves_only_rows_with_that_platform(tmp_path):
    (tmp_path / "fw.toml").write_text(BUILDS)
    (tmp_path / "img.toml").write_text(OVERLAY)
    files = [tmp_path / "img.toml", tmp_path / "fw.toml"]
    r = _cli(["ci", "plan", "--platform", "linux/arm64"], files)
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)
    assert plan["platform"] == "linux/arm64"
    rows = " ".join(s["rows"] for s in plan["include"]).split()
    m = load_matrix(files)  # the CLI loads the shipped matrix plus ENVMAN_MATRIX files
    arm_rows = {b.name for b in m.builds if "linux/arm64" in b.platforms}
    assert set(rows) == arm_rows and "torch-2.4.1-cuda12.4" in rows and "torch-2.5.0-cuda12.4" not in rows
    r = _cli(["ci", "plan"], files)
    all_rows = " ".join(s["rows"] for s in json.loads(r.stdout)["include"]).split()
    assert "torch-2.5.0-cuda12.4" in all_rows and len(all_rows) == len(m.builds)


def test_ci_run_row_resolves_for_the_run_platform(arm):
    from envman.ci.run import RunOptions, plan_rows

    b = next(b for b in arm.builds if str(b.version) == "2.4.1" and b.variant == "cu124")
    (row,) = plan_rows(arm, [b], "linux/arm64")
    assert row.group == "nvidia/cuda:12.4.1-base-ubuntu22.04"
    assert RunOptions(platform="linux/arm64").platform == "linux/arm64"


# --- the same rules on in-memory rows (one platform fact differs per test) ----------------------

V = Version
ARM = "linux/arm64"
AMD = "linux/amd64"
BOTH = (AMD, ARM)
B12 = "torch-2.4.1-cuda12.4"
IMG12 = "nvidia/cuda:12.4.1-base-ubuntu22.04"


def set_build(m: Matrix, name: str, **kw) -> Matrix:
    return replace(m, builds=tuple(replace(b, **kw) if b.name == name else b for b in m.builds))


def set_image(m: Matrix, ref: str, **kw) -> Matrix:
    return replace(m, images=tuple(replace(i, **kw) if i.ref == ref else i for i in m.images))


@pytest.fixture
def arm_mini(mini) -> Matrix:
    """The mini matrix with torch 2.4.1 cu124 and its base image published for arm64 too."""
    m = set_build(mini, B12, platforms=BOTH, platform_source=("wheel-index",))
    return set_image(m, IMG12, platforms=BOTH, platform_source=("manifest",))


# --- the --platform option ---------------------------------------------------------------------

@pytest.mark.parametrize("text, platform", [("linux/arm64", ARM), ("arm64", ARM), ("aarch64", ARM),
                                            (" LINUX/ARM64 ", ARM), ("linux/amd64", AMD), ("amd64", AMD),
                                            ("x86_64", AMD), ("linux/x86_64", AMD)])
def test_parse_platform(text, platform):
    assert parse_platform(text) == platform


@pytest.mark.parametrize("text", ["", "arm", "linux/arm", "windows/amd64", "linux/arm64/v8", "darwin/arm64", "linux/"])
def test_parse_platform_refuses(text):
    with pytest.raises(UserError) as e:
        parse_platform(text)
    assert e.value.what == f"unknown platform {text!r}"
    assert e.value.where == "--platform" and e.value.fix == "use linux/amd64 or linux/arm64"


# --- resolving on a platform --------------------------------------------------------------------

def test_default_platform_is_amd64_and_not_named(arm_mini):
    s = resolve(arm_mini, "torch-2.4-cuda12")
    assert s.platform == AMD and s.name == "torch-2.4.1-cuda12.4-py3.10"
    assert "platform" not in s.to_json()  # amd64 stacks keep their JSON and render hash
    assert Stack.from_json(s.to_json()) == s


def test_arm64_by_name_or_option(arm_mini):
    by_name = resolve(arm_mini, "torch-2.4-cuda12-arm64")
    by_option = resolve(arm_mini, "torch-2.4-cuda12", platform=ARM)
    assert by_name == by_option
    assert by_name.platform == ARM and by_name.name == "torch-2.4.1-cuda12.4-py3.10-arm64"
    assert by_name.to_json()["platform"] == ARM
    assert resolve(arm_mini, by_name.name) == by_name
    assert Stack.from_json(by_name.to_json()) == by_name


def test_name_and_option_must_agree(arm_mini):
    assert resolve(arm_mini, "torch-2.4-cuda12-arm64", platform=ARM).platform == ARM
    with pytest.raises(ResolveError) as e:
        resolve(arm_mini, "torch-2.4-cuda12-arm64", platform=AMD)
    assert e.value.what == "stack name 'torch-2.4-cuda12-arm64' names platform linux/arm64, --platform says linux/amd64"
    assert e.value.fix == "give the platform once (in the name or with --platform)"


def test_rows_without_the_platform_are_skipped(arm_mini):
    # cu118 has no arm64 wheels: torch-2.4-cuda11 on arm64 has nothing to offer
    with pytest.raises(ResolveError) as e:
        resolve(arm_mini, "torch-2.4-cuda11", platform=ARM)
    assert e.value.what == ("torch 2.4 has no linux/arm64 build in the matrix (CUDA 11 builds up to 2.4.1 exist for "
                            "linux/amd64 only)")
    assert e.value.fix == ("build it for linux/amd64, or pick a release with linux/arm64 wheels "
                           "(envman matrix ls --platform linux/arm64)")
    with pytest.raises(ResolveError) as e:
        resolve(arm_mini, "torch-1.0", platform=ARM)
    assert "torch 1.0 has no linux/arm64 build in the matrix (any builds up to 1.0.1" in e.value.what
    with pytest.raises(ResolveError) as e:
        resolve(arm_mini, "torch-2.4-cpu", platform=ARM)
    assert "(CPU builds up to 2.4.1 exist for linux/amd64 only)" in e.value.what


def test_an_older_release_with_the_platform_is_taken_when_the_newest_has_none(arm_mini):
    newer = replace(next(b for b in arm_mini.builds if b.name == "torch-2.4.1-cuda11.8"), version=V("2.4.2"), default=False)
    m = replace(arm_mini, builds=arm_mini.builds + (newer,))
    assert resolve(m, "torch-2.4-cuda12", platform=ARM).framework_version == "2.4.1"
    assert resolve(m, "torch-2.4-cuda11").framework_version == "2.4.2"


def test_images_without_the_platform_are_skipped(arm_mini):
    amd_only = set_image(arm_mini, IMG12, platforms=(AMD,))
    with pytest.raises(ResolveError) as e:
        resolve(amd_only, "torch-2.4-cuda12", platform=ARM)
    assert e.value.what == "no CUDA 12.4 base base image on linux/arm64 in the matrix for torch-2.4.1-cuda12.4"
    with pytest.raises(ResolveError) as e:
        resolve(set_image(arm_mini, IMG12, platforms=(ARM,)), "torch-2.4-cuda12")
    assert e.value.what == "no CUDA 12.4 base base image in the matrix for torch-2.4.1-cuda12.4"


def test_a_pinned_base_image_must_have_the_platform(arm_mini):
    m = set_build(arm_mini, B12, base_image="nvidia/cuda:12.4.1-devel-ubuntu22.04")
    with pytest.raises(ResolveError):
        resolve(m, "torch-2.4-cuda12", platform=ARM)
    m = set_image(m, "nvidia/cuda:12.4.1-devel-ubuntu22.04", platforms=BOTH, platform_source=("x",))
    assert resolve(m, "torch-2.4-cuda12", platform=ARM).base_image == "nvidia/cuda:12.4.1-devel-ubuntu22.04"


def test_arm64_archs_are_the_rows_arm64_lists(arm_mini):
    m = set_build(arm_mini, B12, sass_arm64=(Arch(8, 0), Arch(9, 0)), ptx_arm64=(Arch(9, 0),))
    a = resolve(m, "torch-2.4-cuda12-arm64")
    assert (a.sass_archs, a.ptx_archs) == (("8.0", "9.0"), ("9.0",))
    x = resolve(m, "torch-2.4-cuda12")
    assert x.sass_archs == ("5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0") and x.ptx_archs == ("9.0",)
    # no arm64 lists: the amd64 ones stand for both
    assert resolve(arm_mini, "torch-2.4-cuda12-arm64").sass_archs == x.sass_archs
    only_sass = set_build(arm_mini, B12, sass_arm64=(Arch(9, 0),), ptx_arm64=None)
    assert resolve(only_sass, "torch-2.4-cuda12-arm64").ptx_archs == ()


def test_arm64_notes_and_sources(arm_mini):
    m = set_build(arm_mini, B12, platform_status="unconfirmed", platform_note="arm64 wheels since 2.4")
    m = set_image(m, IMG12, platform_status="partially confirmed")
    s = resolve(m, "torch-2.4-cuda12-arm64")
    assert s.notes == (
        "arm64 wheels since 2.4",
        "linux/arm64 support of torch-2.4.1-cuda12.4 wheels is unconfirmed",
        f"linux/arm64 support of base image {IMG12} is partially confirmed",
    )
    assert s.sources == ("test", "wheel-index", "manifest")
    amd = resolve(m, "torch-2.4-cuda12")
    assert amd.notes == () and amd.sources == ("test",)
    confirmed = resolve(arm_mini, "torch-2.4-cuda12-arm64")
    assert confirmed.notes == () and confirmed.sources == ("test", "wheel-index", "manifest")


def test_resolve_row_on_a_platform(arm_mini):
    b = next(b for b in arm_mini.builds if b.name == B12)
    assert resolve_row(arm_mini, b, ARM).name == "torch-2.4.1-cuda12.4-py3.10-arm64"
    assert resolve_row(arm_mini, b).platform == DEFAULT_PLATFORM
    cu118 = next(b for b in arm_mini.builds if b.name == "torch-2.4.1-cuda11.8")
    with pytest.raises(ResolveError) as e:
        resolve_row(arm_mini, cu118, ARM)
    assert e.value.what == "torch-2.4.1-cuda11.8 has no linux/arm64 build (it has linux/amd64)"
    assert e.value.fix == "choose a row with wheels for that platform (envman matrix ls --platform ...)"
    amd_img = set_image(arm_mini, IMG12, platforms=(AMD,))
    with pytest.raises(ResolveError, match="on linux/arm64"):
        resolve_row(amd_img, next(b for b in amd_img.builds if b.name == B12), ARM)


# --- the validator's platform rules -------------------------------------------------------------

def test_platform_rows_validate_clean(arm_mini):
    assert validate(arm_mini) == []


@pytest.mark.parametrize(
    "corrupt, where, what",
    [
        (lambda m: set_build(m, B12, platform_source=()), "torch 2.4.1 cu124",
         "platforms beyond linux/amd64 need a platform_source"),
        (lambda m: set_image(m, IMG12, platform_source=()), f"image {IMG12}",
         "platforms beyond linux/amd64 need a platform_source"),
        (lambda m: set_build(m, "torch-2.4.1-cuda11.8", sass_arm64=(Arch(8, 0),)), "torch 2.4.1 cu118",
         "sass_arm64/ptx_arm64 given but linux/arm64 is not in platforms"),
        (lambda m: set_build(m, "torch-2.4.1-cuda11.8", ptx_arm64=(Arch(8, 0),)), "torch 2.4.1 cu118",
         "sass_arm64/ptx_arm64 given but linux/arm64 is not in platforms"),
        (lambda m: set_build(m, B12, sass_arm64=(Arch(10, 0),)), "torch 2.4.1 cu124",
         "SASS sm_100 cannot be built by CUDA 12.4 (nvcc targets 5.0, 6.0, 7.0, 7.5, 8.0, 8.6, 8.9, 9.0)"),
        (lambda m: set_build(m, B12, ptx_arm64=(Arch(3, 5),)), "torch 2.4.1 cu124",
         "PTX compute_35 cannot be built by CUDA 12.4"),
        (lambda m: set_image(m, IMG12, platforms=(AMD,), platform_source=()), "torch 2.4.1 cu124",
         "no base base image for CUDA 12.4 on linux/arm64 (the row lists linux/arm64)"),
    ],
)
def test_each_platform_rule(arm_mini, corrupt, where, what):
    problems = validate(corrupt(arm_mini))
    assert [(p.where, p.what) for p in problems] == [(where, what)]


def test_custom_images_need_no_platform_source(arm_mini):
    custom = replace(next(i for i in arm_mini.images if i.ref == IMG12), repository="example/base", custom=True,
                     platform_source=())
    assert validate(replace(arm_mini, images=arm_mini.images + (custom,))) == []


def test_arm64_lists_with_arm64_in_platforms_are_fine(arm_mini):
    assert validate(set_build(arm_mini, B12, sass_arm64=(Arch(9, 0),), ptx_arm64=(Arch(9, 0),))) == []
