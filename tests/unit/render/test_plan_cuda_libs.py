"""The CUDA-library layer: how a matrix row carries a framework's exact CUDA pins, how a stack gets
them and how both builders install them, in a layer of their own before the framework, the same
step for the same pins (which lines are such pins: tests/unit/matrix/test_wheels.py). No Docker
needed."""

from __future__ import annotations

import pytest

from envman.errors import MatrixError
from envman.matrix.load import load_matrix
from envman.render.dockerfile import render_stack
from envman.stack.names import Stack
from envman.stack.resolve import resolve_row
from tests.unit.conftest import MINI
from tests.unit.render.test_dockerfile import PROBE, instructions, make_stack

TORCH_PINS = ("nvidia-cublas-cu12==12.4.5.8", "nvidia-cudnn-cu12==9.1.0.70", "triton==3.1.0")


# --- the matrix row ------------------------------------------------------------------------------

ROW = """schema = 1
kind = "framework"
framework = "torch"

[[build]]
version = "9.9.0"
variant = "cu124"
cuda = "12.4"
python = ["3.10", "3.13"]
packages = ["torch==9.9.0"]
cuda_libs = {libs}
cuda_libs_source = ["https://pypi.org/simple/torch/"]
system_cuda = false
system_cudnn = false
sass = ["8.0"]
ptx = []
default = true
source = ["https://pypi.org/simple/torch/"]
status = "confirmed"
"""


@pytest.mark.parametrize("libs,needle", [
    ('["numpy==1.26.4"]', "numpy==1.26.4"),                      # not a CUDA library
    ('["nvidia-cublas-cu12>=12.4"]', "nvidia-cublas-cu12>=12.4"),  # not exact
    ('["nvidia-cublas-cu12[x]==12.4.5.8"]', "no extras"),
    ('["nvidia-cublas-cu12==12.4.5.8; $(reboot)"]', "cuda_libs"),  # not a requirement
    ('["nvidia-cublas-cu12 @ https://x.example/a.whl"]', "cuda_libs"),
    ('["triton==3.1.0", "triton==3.1.0"]', "each once"),
    ('"triton==3.1.0"', "cuda_libs"),
])
def test_a_row_with_bad_cuda_libs_is_rejected_in_one_line(tmp_path, libs, needle):
    p = tmp_path / "user.toml"
    p.write_text(ROW.format(libs=libs))
    with pytest.raises(MatrixError) as e:
        load_matrix([*MINI, p], shipped=False)
    line = e.value.line()
    assert needle in line and "cuda_libs" in line and str(p) in line and "\n" not in line


def test_a_row_s_pins_reach_amd64_stacks_only(tmp_path):
    p = tmp_path / "user.toml"
    p.write_text(ROW.format(libs='["triton==3.1.0; python_version < \\"3.13\\"", "nvidia-cublas-cu12==12.4.5.8"]')
                 .replace('python = ["3.10", "3.13"]', 'python = ["3.10", "3.13"]\nplatforms = ["linux/amd64", "linux/arm64"]\n'
                          'platform_source = ["https://pypi.org/simple/torch/"]'))
    m = load_matrix([*MINI, p], shipped=False)
    build = next(b for b in m.builds if str(b.version) == "9.9.0")
    stack = resolve_row(m, build)
    assert stack.cuda_libs == (("nvidia-cublas-cu12==12.4.5.8", "triton==3.1.0") if stack.python == "3.10"
                               else ("nvidia-cublas-cu12==12.4.5.8",))
    from envman.stack.resolve import stack_cuda_libs

    assert stack_cuda_libs(build, "3.10", "linux/amd64") == ("nvidia-cublas-cu12==12.4.5.8", "triton==3.1.0")
    assert stack_cuda_libs(build, "3.10", "linux/arm64") == ()  # read from the x86_64 wheel: nothing said of arm64


def test_a_stack_without_cuda_libs_keeps_its_json_and_one_with_them_round_trips():
    plain = make_stack()
    assert "cuda_libs" not in plain.to_json()
    with_libs = make_stack(cuda_libs=TORCH_PINS)
    assert with_libs.to_json()["cuda_libs"] == list(TORCH_PINS)
    assert Stack.from_json(with_libs.to_json()) == with_libs


# --- the render ----------------------------------------------------------------------------------


def _runs(stack: Stack, builder: str = "classic") -> list[str]:
    return [v for k, v in instructions(render_stack(stack, probe=PROBE, builder=builder).dockerfile) if k == "RUN"]


@pytest.mark.parametrize("builder", ["classic", "buildkit"])
def test_the_cuda_libraries_are_installed_alone_before_the_framework(builder):
    runs = _runs(make_stack(cuda_libs=TORCH_PINS), builder)
    cuda = next(i for i, r in enumerate(runs) if "nvidia-cublas-cu12==12.4.5.8" in r)
    fw = next(i for i, r in enumerate(runs) if "torch==2.4.1" in r)
    py = next(i for i, r in enumerate(runs) if "-m venv" in r)
    assert py < cuda < fw
    step = runs[cuda]
    assert "torch==" not in step and "torchvision" not in step
    for flag in ("--no-deps", "--only-binary=:all:", "--no-compile", "--index-url https://download.pytorch.org/whl/cu124"):
        assert flag in step
    assert " ".join(TORCH_PINS) in step  # sorted, each once
    assert "SOURCE_DATE_EPOCH=315532800" in step and "PYTHONDONTWRITEBYTECODE=1" in step
    # Every file the step wrote gets one time, after everything else in the step.
    settle = ('for d in /opt /tmp /root; do if [ -d "$d" ]; then find "$d" -xdev -newermt "@$settled" '
              '-exec touch -h -d @315532800 {} +; fi; done')
    assert " ".join(step.split()).endswith(settle)
    assert ("--no-cache-dir" in step) == (builder == "classic")
    if builder == "buildkit":
        assert "id=envman-pip" in step and "envman-uv" not in step and "envman-tools" not in step


def test_no_pins_no_layer():
    assert not any("nvidia-cublas-cu12==" in r for r in _runs(make_stack()))


@pytest.mark.parametrize("builder", ["classic", "buildkit"])
def test_same_pins_give_the_same_step_whatever_the_framework(builder):
    a = make_stack(cuda_libs=TORCH_PINS)
    b = make_stack(cuda_libs=TORCH_PINS, name="torch-2.5.1-cuda12.4-py3.10",
                   row="torch-2.5.1-cuda12.4", framework_version="2.5.1", packages=("torch==2.5.1", "torchvision==0.20.1"))
    c = make_stack(cuda_libs=(*TORCH_PINS[:2], "triton==3.2.0"))
    step = [r for r in _runs(a, builder) if "nvidia-cublas-cu12==" in r]
    assert step and step == [r for r in _runs(b, builder) if "nvidia-cublas-cu12==" in r]
    assert step != [r for r in _runs(c, builder) if "nvidia-cublas-cu12==" in r]
    # And everything before it (the layers it sits on) is the same too.
    before = _runs(a, builder)[:_runs(a, builder).index(step[0])]
    assert before == _runs(b, builder)[:len(before)]


@pytest.mark.parametrize("builder", ["classic", "buildkit"])
def test_the_python_step_is_settled_too(builder):
    py = next(r for r in _runs(make_stack(), builder) if "-m venv" in r)
    lines = [ln.strip() for ln in py.replace("\\\n", "\n").split(";")]
    assert lines[1].startswith('settled="$(($(date +%s) - 1))"')
    assert py.rstrip().endswith("-exec touch -h -d @315532800 {} +; fi; done")


def test_shipped_pypi_torch_row_carries_its_pins():
    from envman.matrix.load import load_matrix as load

    m = load()
    b = next(b for b in m.builds if b.framework == "torch" and str(b.version) == "2.0.1" and b.variant == "cu117")
    stack = resolve_row(m, b)
    pins = [line.split(" ")[0] for line in stack.cuda_libs]
    assert "triton==2.0.0" in pins and "nvidia-cudnn-cu11==8.5.0.96" in pins and pins == sorted(pins)
    assert b.cuda_libs_source and b.cuda_libs_source[0].endswith(".whl")
    assert all(" --hash=sha256:" in line for line in stack.cuda_libs)  # every pin hash-checked


# --- hashes ----------------------------------------------------------------------------------------

H1, H2, H3 = "a" * 64, "b" * 64, "0123456789abcdef" * 4
def _row_with(tmp_path, table: str, libs: str = '["triton==3.1.0", "nvidia-cublas-cu12==12.4.5.8"]'):
    p = tmp_path / "user.toml"
    p.write_text(ROW.format(libs=libs) + "\n[build.cuda_libs_sha256]\n" + table)
    return p


def test_a_row_s_hashes_follow_each_pin_into_the_stack(tmp_path):
    p = _row_with(tmp_path, f'triton = ["{H2}", "{H1}"]\nnvidia-cublas-cu12 = ["{H3}"]\n')
    m = load_matrix([*MINI, p], shipped=False)
    build = next(b for b in m.builds if str(b.version) == "9.9.0")
    from envman.stack.resolve import stack_cuda_libs

    assert stack_cuda_libs(build, "3.10", "linux/amd64") == (
        f"nvidia-cublas-cu12==12.4.5.8 --hash=sha256:{H3}", f"triton==3.1.0 --hash=sha256:{H1} --hash=sha256:{H2}")


@pytest.mark.parametrize("table,needle", [
    (f'triton = ["{H1}"]\n', "cuda_libs_sha256"),                                          # a pin without hashes
    (f'triton = ["{H1}"]\nnvidia-cublas-cu12 = ["{H1}"]\nnumpy = ["{H1}"]\n', "cuda_libs_sha256"),  # one more
    (f'triton = ["{H1[:-1]}"]\nnvidia-cublas-cu12 = ["{H1}"]\n', "cuda_libs_sha256"),     # 63 hex digits
    (f'triton = ["{H1}0"]\nnvidia-cublas-cu12 = ["{H1}"]\n', "cuda_libs_sha256"),         # 65
    (f'triton = ["{H1.upper()}"]\nnvidia-cublas-cu12 = ["{H1}"]\n', "cuda_libs_sha256"),  # not lower case
    (f'triton = []\nnvidia-cublas-cu12 = ["{H1}"]\n', "cuda_libs_sha256"),
    (f'triton = ["{H1}", "{H1}"]\nnvidia-cublas-cu12 = ["{H1}"]\n', "cuda_libs_sha256"),
    (f'Triton = ["{H1}"]\nnvidia-cublas-cu12 = ["{H1}"]\n', "cuda_libs_sha256"),         # not the canonical name
])
def test_bad_hashes_are_rejected_in_one_line(tmp_path, table, needle):
    p = _row_with(tmp_path, table)
    with pytest.raises(MatrixError) as e:
        load_matrix([*MINI, p], shipped=False)
    line = e.value.line()
    assert needle in line and str(p) in line and "\n" not in line


@pytest.mark.parametrize("builder", ["classic", "buildkit"])
def test_hashed_pins_install_in_hash_checking_mode_from_a_file_removed_in_the_step(builder):
    pins = (f"nvidia-cublas-cu12==12.4.5.8 --hash=sha256:{H1}", f"triton==3.1.0 --hash=sha256:{H2} --hash=sha256:{H3}")
    step = next(r for r in _runs(make_stack(cuda_libs=pins), builder) if "nvidia-cublas-cu12==" in r)
    flat = " ".join(step.split())
    assert f"printf '%s\\n' '{pins[0]}' '{pins[1]}' > /tmp/envman-cuda-libs.txt;" in flat
    assert "--require-hashes --no-deps --only-binary=:all: --no-compile" in flat and "-r /tmp/envman-cuda-libs.txt" in flat
    assert flat.index("-r /tmp/envman-cuda-libs.txt") < flat.index("rm -f /tmp/envman-cuda-libs.txt") < flat.index("for d in /opt")


@pytest.mark.parametrize("pins", [
    (f"nvidia-cublas-cu12==12.4.5.8 --hash=sha256:{H1}", "triton==3.1.0"),   # some hashed, some not
    ("triton==3.1.0; rm -rf /",),                                           # a stack JSON changed by hand
    (f"triton==3.1.0 --hash=sha256:{H1[:-1]}",),
    ("triton==3.1.0 --index-url=https://x.example/",),
    ("Triton==3.1.0",),
])
def test_a_pin_that_is_not_name_version_and_hashes_stops_the_render(pins):
    from envman.errors import RenderError

    with pytest.raises(RenderError) as e:
        render_stack(make_stack(cuda_libs=pins), probe=PROBE)
    assert "\n" not in e.value.line()


