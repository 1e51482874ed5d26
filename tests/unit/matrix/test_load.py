"""Loading: malformed user files are rejected whole, with file, key and expectation."""

import pytest

from envman.errors import MatrixError
from envman.matrix.load import load_matrix
from envman.matrix.validate import expected_tag, validate

from tests.unit.conftest import MINI


def write(tmp_path, text, name="user.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_mini_matrix_is_valid(mini):
    assert validate(mini) == []


@pytest.mark.parametrize(
    "text,needle",
    [
        ("schema = 2\nkind='os'\n", "key schema: expected 1"),
        ("schema = 1\nkind='nope'\n", "key kind"),
        ("schema = 1\nkind='gpus'\n[[gpu]]\nid='x'\nname='X'\ncc='eight'\nsource=['s']\nstatus='confirmed'\n", "gpu[0].cc"),
        ("schema = 1\nkind='gpus'\n[[gpu]]\nid='x'\nname='X'\ncc='8.0'\nstatus='confirmed'\n", "gpu[0].source"),
        ("schema = 1\nkind='gpus'\n[[gpu]]\nid='x'\nname='X'\ncc='8.0'\nsource=['s']\nstatus='maybe'\n", "gpu[0].status"),
        ("schema = 1\nkind='gpus'\n[[gpu]]\nid='x'\nname='X'\ncc='8.0'\nsource=['s']\nstatus='confirmed'\ncolour='red'\n", "unknown key gpu[0].colour"),
        ("schema = 1\nkind='framework'\nframework='torch'\n[[build]]\nversion='2.0'\nvariant='cpu'\npackages=['torch==2.0']\nsource=['s']\nstatus='confirmed'\n", "build[0].python"),
        ("schema = [1\n", "not valid TOML"),
    ],
)
def test_malformed_user_file_is_rejected_with_file_and_key(tmp_path, text, needle):
    p = write(tmp_path, text)
    with pytest.raises(MatrixError) as e:
        load_matrix([*MINI, p], shipped=False)
    line = e.value.line()
    assert needle in line and str(p) in line and "\n" not in line
    assert e.value.exit_code == 2


def test_user_row_replaces_shipped_row_and_adds_custom_base(tmp_path, mini):
    p = write(
        tmp_path,
        """schema = 1
kind = "images"
[[image]]
repository = "registry.corp.example/ml/cuda"
tag = "12.4-private"
cuda = "12.4.1"
flavour = "base"
os = "ubuntu22.04"
status = "unknown"
custom = true
source = ["our platform team"]
""",
    )
    m = load_matrix([*MINI, p], shipped=False)
    assert any(i.custom and i.ref == "registry.corp.example/ml/cuda:12.4-private" for i in m.images)
    assert validate(m) == []


def test_env_var_adds_files(tmp_path, monkeypatch):
    p = write(tmp_path, "schema = 1\nkind='gpus'\n[[gpu]]\nid='x1'\nname='X One'\ncc='8.0'\nsource=['s']\nstatus='unconfirmed'\n")
    monkeypatch.setenv("ENVMAN_MATRIX", str(p))
    m = load_matrix(MINI, shipped=False)
    assert m.gpu("x one").cc.major == 8


def test_missing_user_file(tmp_path):
    with pytest.raises(MatrixError, match="not found"):
        load_matrix([tmp_path / "nope.toml"], shipped=False)


def test_validate_finds_cross_inconsistencies(tmp_path):
    p = write(
        tmp_path,
        """schema = 1
kind = "framework"
framework = "torch"
[[build]]
version = "9.0.0"
variant = "cu999"
cuda = "99.9"
python = ["3.11"]
packages = ["torch==9.0.0"]
sass = ["8.0"]
source = ["s"]
status = "confirmed"
""",
    )
    m = load_matrix([*MINI, p], shipped=False)
    assert any("CUDA 99.9 is not a release" in str(x) for x in validate(m))


def test_tag_naming_rules_of_each_era(mini):
    from envman.matrix.model import BaseImage
    from packaging.version import Version

    def img(patch, flavour, cudnn, os="ubuntu22.04"):
        v = Version(patch)
        return BaseImage("nvidia/cuda", "", Version(f"{v.major}.{v.minor}"), v, flavour, cudnn, os, "published", ("s",))

    assert expected_tag(img("10.0", "cudnn-runtime", "7", "ubuntu18.04")) == "10.0-cudnn7-runtime-ubuntu18.04"
    assert expected_tag(img("11.8.0", "cudnn-devel", "8")) == "11.8.0-cudnn8-devel-ubuntu22.04"
    assert expected_tag(img("12.3.2", "cudnn-runtime", "9")) == "12.3.2-cudnn9-runtime-ubuntu22.04"
    assert expected_tag(img("12.4.1", "cudnn-runtime", "9")) == "12.4.1-cudnn-runtime-ubuntu22.04"
    assert expected_tag(img("12.4.1", "base", None)) == "12.4.1-base-ubuntu22.04"


def test_a_file_rewritten_between_two_loads_in_one_process_is_read_again(tmp_path):
    """Parsed files are reused within a process only for the same bytes under the same path."""
    gpu = "[[gpu]]\nid='x'\nname='{name}'\ncc='8.0'\nsource=['s']\nstatus='confirmed'\n"
    p = write(tmp_path, "schema = 1\nkind='gpus'\n" + gpu.format(name="First"))
    first = load_matrix([*MINI, p], shipped=False)
    p.write_text("schema = 1\nkind='gpus'\n" + gpu.format(name="Second"))
    second = load_matrix([*MINI, p], shipped=False)
    assert [g.name for g in first.gpus if g.id == "x"] == ["First"]
    assert [g.name for g in second.gpus if g.id == "x"] == ["Second"]
    p.write_text("schema = 1\nkind='gpus'\n" + gpu.format(name="First") + "cc='8.6'\n")
    with pytest.raises(MatrixError):  # a broken rewrite is an error again, not the earlier rows
        load_matrix([*MINI, p], shipped=False)
    other = write(tmp_path, "schema = 1\nkind='gpus'\n" + gpu.format(name="First"), name="other.toml")
    assert load_matrix([*MINI, other], shipped=False).files[-1] == str(other)


# --------------------------------------------------------------------------- rows that could not be resolved or rendered

ROW = """schema = 1
kind = "framework"
framework = "torch"

[[build]]
version = "{version}"
variant = "{variant}"
python = ["3.11"]
packages = ["torch=={version}"]
source = ["test"]
status = "confirmed"
"""

#: (version, variant) -> loads. The rule is envman.stack.names.row_name_problems: a name users can
#: type (no local version), a variant that fits an image tag.
ROWS = {
    ("2.4.1", "cpu"): True, ("2.4.1", "cu128"): True, ("2.4.1", "rocm6.1"): True,
    ("2.4.1", "cu\u0661\u0662\u0668"): False,  # Arabic-Indic digits
    ("2.4.1", "cu\uff11\uff12\uff18"): False,  # fullwidth digits
    ("2.4.1", "c" * 65): False, ("2.4.1", "-cpu"): False, ("2.4.1", "cpu/x"): False,
    ("2.4.1+corp1", "cpu"): False, ("2.4.1+cu124", "cu124"): False,
}


@pytest.mark.parametrize("case", sorted(ROWS), ids=[f"row{i}" for i in range(len(ROWS))])
def test_a_row_loads_only_when_it_can_be_resolved_and_rendered(tmp_path, case):
    version, variant = case
    f = tmp_path / "user.toml"
    f.write_text(ROW.format(version=version, variant=variant))
    if ROWS[case]:
        assert any(b.variant == variant for b in load_matrix([f]).builds)
        return
    with pytest.raises(MatrixError) as e:
        load_matrix([f])
    assert e.value.where == str(f) and "build[0]" in e.value.what and "\n" not in str(e.value)


@pytest.mark.parametrize("words", [["matrix", "ls"], ["ci", "plan"]])
def test_matrix_ls_and_ci_plan_refuse_a_row_that_would_fail_at_render(tmp_path, words):
    from tests.support.cli import run_envman

    f = tmp_path / "user.toml"
    f.write_text(ROW.format(version="2.4.1", variant="cu\u0661\u0662\u0668"))
    r = run_envman(["--matrix", str(f), *words], cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "variant" in r.stderr, (r.stdout, r.stderr)
