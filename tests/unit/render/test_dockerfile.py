"""Rendering a Stack into a build context: layout, layers, Python, NVIDIA variables, labels,
the render hash, network options, the CLI and the golden files. No Docker needed."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

from envman import __version__
from envman.errors import RenderError, UserError
from envman.render.dockerfile import (
    CA_DEST,
    PROBE_CONTEXT_FILE,
    UV_VERSION,
    BuildContext,
    RenderOptions,
    mirror_image,
    nvidia_require_cuda,
    pip_requirement,
    render_hash,
    render_stack,
    verify_context,
)
from envman.stack.resolve import Stack
from tests.support.cli import run_envman
from tests.support.index_server import make_wheel

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = (ROOT / "matrices" / "torch.toml").exists()
needs_shipped = pytest.mark.skipif(not SHIPPED, reason="matrices/torch.toml is absent: the shipped matrix is not in this checkout")
PROBE = b"# test probe\n"
PEM = b"-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"


def make_stack(**kw) -> Stack:
    """A GPU stack like torch 2.4.1 on CUDA 12.4 / Ubuntu 22.04; override any field."""
    base = dict(
        name="torch-2.4.1-cuda12.4-py3.10",
        row="torch-2.4.1-cuda12.4",
        framework="torch",
        framework_version="2.4.1",
        variant="cu124",
        cuda="12.4",
        cudnn=None,
        python="3.10",
        python_strategy="apt",
        os="ubuntu22.04",
        base_image="nvidia/cuda:12.4.1-base-ubuntu22.04",
        base_image_status="published",
        base_image_custom=False,
        flavour="base",
        min_driver="525.60.13",
        toolkit_driver="550.54.14",
        minor_compat=True,
        minor_compat_status="confirmed",
        sass_archs=("8.0", "9.0"),
        ptx_archs=(),
        arch_status="confirmed",
        packages=("torch==2.4.1", "torchvision==0.19.1"),
        index_url="https://download.pytorch.org/whl/cu124",
        extra_index_url=None,
        find_links=None,
        sources=("https://pypi.org/simple/torch/",),
        status="confirmed",
        notes=('a note with "quotes", $HOME, a back\\slash and a\nnewline',),
    )
    base.update(kw)
    return Stack(**base)


def cpu_stack(**kw) -> Stack:
    return make_stack(
        **{
            "name": "torch-2.4.1-cpu-py3.12",
            "row": "torch-2.4.1-cpu",
            "variant": "cpu",
            "cuda": None,
            "python": "3.12",
            "os": "ubuntu24.04",
            "base_image": "ubuntu:24.04",
            "min_driver": None,
            "toolkit_driver": None,
            "minor_compat": False,
            "minor_compat_status": None,
            "sass_archs": (),
            "index_url": "https://download.pytorch.org/whl/cpu",
            **kw,
        }
    )


def render(stack: Stack | None = None, options: RenderOptions | None = None) -> BuildContext:
    return render_stack(stack or make_stack(), options, probe=PROBE)


def parse(dockerfile: str) -> DockerfileParser:
    p = DockerfileParser(fileobj=io.BytesIO())
    p.content = dockerfile
    return p


def instructions(dockerfile: str) -> list[tuple[str, str]]:
    return [(i["instruction"], i["value"]) for i in parse(dockerfile).structure if i["instruction"] != "COMMENT"]


def first_index(items: list[tuple[str, str]], pred) -> int:
    return next(i for i, it in enumerate(items) if pred(it))


@pytest.fixture
def wheelhouse(tmp_path: Path) -> Path:
    d = tmp_path / "wheels"
    d.mkdir()
    for name in ("torch-2.4.1-cp310-cp310-manylinux1_x86_64.whl", "numpy-1.26.4-cp310-cp310-manylinux_2_17_x86_64.whl",
                 "pip-24.0-py3-none-any.whl", "torchvision-0.19.1-py3-none-any.whl"):
        (d / name).write_bytes(make_wheel(name, ["numpy>=1.22"] if name.startswith("torch") else [])[0])
    (d / "README.txt").write_text("not a wheel")
    return d


@pytest.fixture
def ca_file(tmp_path: Path) -> Path:
    p = tmp_path / "corp.pem"
    p.write_bytes(PEM)
    return p


# --- determinism and the context ------------------------------------------------------------


def test_two_renders_are_byte_identical():
    a, b = render(), render()
    assert a.dockerfile == b.dockerfile and a.files == b.files and a.render_hash == b.render_hash
    assert a.tar() == b.tar()


def test_renders_agree_across_processes_and_hash_seeds():
    code = (
        "from tests.unit.render.test_dockerfile import make_stack, render; from envman.render.options import RenderOptions;"
        "print(render(make_stack(python='3.12', python_strategy='standalone'), RenderOptions(registry_mirror='r.example',"
        " pip_index='https://p.example/simple', apt_mirror='http://a.example/u')).render_hash)"
    )
    hashes = {
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}).stdout.strip()
        for seed in ("1", "2", "3")
    }
    assert len(hashes) == 1 and len(hashes.pop()) == 64


def test_context_layout_and_modes():
    ctx = render()
    assert list(ctx.files) == sorted(ctx.files) == ["Dockerfile", "envman/entrypoint.sh", "envman/probe.pyz", "envman/stack.json"]
    assert ctx.files["Dockerfile"] == ctx.dockerfile.encode()
    assert ctx.files["envman/probe.pyz"] == PROBE
    assert json.loads(ctx.files["envman/stack.json"]) == ctx.stack.to_json()
    assert ctx.files["envman/entrypoint.sh"] == (ROOT / "templates" / "dockerfiles" / "entrypoint.sh").read_bytes()
    assert ctx.modes["envman/entrypoint.sh"] == 0o755 and ctx.modes["Dockerfile"] == 0o644


def test_tar_is_normalised():
    ctx = render()
    with tarfile.open(fileobj=io.BytesIO(ctx.tar())) as tar:
        members = tar.getmembers()
        names = [m.name for m in members]
        assert names == sorted(names) and "envman" in names  # parent directory entries
        for m in members:
            assert (m.uid, m.gid, m.uname, m.gname, m.mtime) == (0, 0, "", "", 0)
        assert tar.getmember("envman/entrypoint.sh").mode == 0o755
        assert tar.extractfile("Dockerfile").read() == ctx.files["Dockerfile"]


def test_layer_order_serves_the_cache():
    d = render(make_stack(), RenderOptions()).dockerfile
    ins = instructions(d)
    assert ins[0] == ("FROM", "nvidia/cuda:12.4.1-base-ubuntu22.04")
    apt = first_index(ins, lambda i: i[0] == "RUN" and "apt-get" in i[1] and " install " in i[1])
    py = first_index(ins, lambda i: i[0] == "RUN" and "-m venv --system-site-packages /opt/venv" in i[1])
    fw = first_index(ins, lambda i: i[0] == "RUN" and "torch==2.4.1" in i[1])
    copy_envman = first_index(ins, lambda i: i[0] == "COPY" and "envman/probe.pyz" in i[1])
    labels = [k for k, (name, _) in enumerate(ins) if name == "LABEL"]
    assert apt < py < fw < copy_envman < labels[0]
    assert ins[-1][0] == "LABEL" and ins[-1][1].startswith("envman.render-hash=")
    assert d.splitlines()[-1] == f'LABEL envman.render-hash="{render().render_hash}"'


# --- Python provisioning -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "python,req",
    [("3.5", "pip<21"), ("3.6", "pip<22"), ("3.7", "pip<24.1"), ("3.8", "pip"), ("3.12", "pip"), ("3.13", "pip")],
)
def test_pip_cap_per_interpreter(python, req):
    assert pip_requirement(python) == req


def test_apt_python_venv_and_pip_pin():
    d = render(make_stack(python="3.6", os="ubuntu18.04", base_image="nvidia/cuda:10.0-base-ubuntu18.04", cuda="10.0",
                          minor_compat=False, min_driver="410.48")).dockerfile
    assert "install -y --no-install-recommends ca-certificates python3-distutils python3.6 python3.6-venv;" in d
    assert "python3.6 -m venv --system-site-packages /opt/venv;" in d
    assert "/opt/venv/bin/python -m pip install --no-cache-dir --upgrade 'pip<22'" in d
    envs = parse(d).envs
    assert envs["PATH"].startswith("/opt/venv/bin:") and envs["VIRTUAL_ENV"] == "/opt/venv"
    assert "uv" not in d.split("# 3.")[0].replace("envman-uv", "")  # no uv bootstrap for an apt Python


def test_distutils_only_where_the_distribution_splits_it_out():
    d22 = render(make_stack()).dockerfile
    assert "python3-distutils" not in d22
    d20 = render(make_stack(python="3.9", os="ubuntu20.04", base_image="nvidia/cuda:12.4.1-base-ubuntu20.04")).dockerfile
    assert "python3-distutils python3.9 python3.9-venv" in d20


def test_standalone_python_through_uv():
    s = make_stack(python="3.13", python_strategy="standalone", os="ubuntu24.04",
                   base_image="nvidia/cuda:12.8.1-base-ubuntu24.04", name="torch-2.7.1-cuda12.8-py3.13")
    d = render(s).dockerfile
    assert "ca-certificates python3 python3-venv;" in d
    assert f"--ignore-requires-python uv=={UV_VERSION};" in d
    assert "/tmp/envman-uv/bin/uv python install --no-bin 3.13;" in d
    assert "uv python find --managed-python 3.13)\" -m venv --system-site-packages /opt/venv;" in d
    assert "rm -rf /tmp/envman-uv /tmp/envman-uv-cache;" in d
    assert "UV_PYTHON_INSTALL_MIRROR=" not in d
    m = render(s, RenderOptions(python_install_mirror="https://pbs.corp.example/releases/download")).dockerfile
    assert m.count("UV_PYTHON_INSTALL_MIRROR=https://pbs.corp.example/releases/download") == 2
    # an old distribution's python3 needs a newer pip for uv's manylinux2014 wheel, and distutils for it
    old = render(dataclasses.replace(s, os="ubuntu18.04", python="3.9", base_image="nvidia/cuda:10.2-base-ubuntu18.04")).dockerfile
    assert "/tmp/envman-uv/bin/python -m pip install --no-cache-dir --upgrade 'pip<22';" in old
    assert "python3-distutils" in old


def test_standalone_needs_a_python_build_standalone_version():
    with pytest.raises(RenderError, match="python-build-standalone starts at 3.8"):
        render(make_stack(python="3.7", python_strategy="standalone"))


def test_python_older_than_35_is_refused():
    with pytest.raises(RenderError, match="older than 3.5"):
        render(make_stack(python="2.7"))


# --- NVIDIA variables --------------------------------------------------------------------------


def test_nvidia_env_with_minor_version_compatibility():
    envs = parse(render().dockerfile).envs
    assert envs["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert envs["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert envs["NVIDIA_REQUIRE_CUDA"] == "driver>=525.60.13"


def test_nvidia_env_without_minor_version_compatibility():
    s = make_stack(cuda="10.0", minor_compat=False, minor_compat_status=None, min_driver="410.48")
    assert nvidia_require_cuda(s)[0] == "cuda>=10.0"
    assert parse(render(s).dockerfile).envs["NVIDIA_REQUIRE_CUDA"] == "cuda>=10.0"


def test_cpu_stack_has_no_nvidia_variables_and_no_cuda_repo_handling():
    d = render(cpu_stack()).dockerfile
    assert "NVIDIA_" not in d and "envman-set-aside" not in d
    assert instructions(d)[0] == ("FROM", "ubuntu:24.04")


def test_minor_compat_without_min_driver_is_an_error():
    with pytest.raises(RenderError, match="min_driver"):
        render(make_stack(min_driver=None))


# --- labels and the render hash -----------------------------------------------------------------


def test_labels_round_trip():
    ctx = render()
    labels = parse(ctx.dockerfile).labels
    assert labels["envman.managed"] == "true"
    assert labels["envman.name"] == ctx.stack.name
    assert labels["envman.version"] == __version__
    assert json.loads(labels["envman.stack"]) == ctx.stack.to_json()  # quotes, $, backslash, newline in a note
    assert labels["envman.render-hash"] == ctx.render_hash


def test_render_hash_covers_every_file_but_its_own_line():
    ctx = render()
    assert render_hash(ctx.files) == ctx.render_hash
    other = render_stack(make_stack(), None, probe=b"# another probe\n")
    assert other.render_hash != ctx.render_hash  # the probe is part of the context


def test_verify_context_and_the_documented_shell_line(tmp_path):
    ctx = render(make_stack(), RenderOptions())
    dest = ctx.write(tmp_path / "ctx")
    assert verify_context(dest) == ctx.render_hash
    if shutil.which("sha256sum") and shutil.which("find"):
        line = (
            "{ head -n -1 Dockerfile | sha256sum | sed 's/ -$/ Dockerfile/'; "
            "find . -type f ! -path ./Dockerfile -printf '%P\\0' | xargs -0 -r sha256sum; } | "
            "LC_ALL=C sort -k 2 | sha256sum"
        )
        out = subprocess.run(["bash", "-c", line], cwd=dest, capture_output=True, text=True, check=True).stdout
        assert out.split()[0] == ctx.render_hash
    (dest / "envman" / "stack.json").write_text("{}")
    with pytest.raises(RenderError, match="render hash mismatch"):
        verify_context(dest)


# --- writing ---------------------------------------------------------------------------------


def test_write_is_atomic_and_replaces_an_earlier_context(tmp_path):
    dest = tmp_path / "out" / "ctx"
    render(cpu_stack()).write(dest)
    ctx = render()
    ctx.write(dest)
    assert (dest / "Dockerfile").read_text() == ctx.dockerfile
    assert os.stat(dest / "envman" / "entrypoint.sh").st_mode & 0o777 == 0o755
    assert sorted(p.name for p in dest.parent.iterdir()) == ["ctx"]  # no temporary left behind


def test_write_refuses_a_directory_that_is_not_a_context(tmp_path):
    (tmp_path / "mine.txt").write_text("precious")
    with pytest.raises(UserError, match="not an envman build context"):
        render().write(tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "precious"


def test_write_failure_leaves_nothing(tmp_path, monkeypatch):
    ctx = render()
    real_chmod = os.chmod

    def boom(path, mode):
        if str(path).endswith("stack.json"):
            raise OSError("disk full")
        return real_chmod(path, mode)

    monkeypatch.setattr(os, "chmod", boom)
    with pytest.raises(OSError):
        ctx.write(tmp_path / "ctx")
    assert list(tmp_path.iterdir()) == []


def test_missing_probe_is_a_clear_error(monkeypatch, tmp_path):
    import envman.probe as probe_pkg
    from envman.render.dockerfile import probe_source

    monkeypatch.setattr(probe_pkg, "APP_DIR", tmp_path / "app")
    probe_pkg.probe_archive.cache_clear()
    try:
        with pytest.raises(RenderError, match="the probe is missing from this installation"):
            probe_source()
    finally:
        monkeypatch.undo()
        probe_pkg.probe_archive.cache_clear()


def test_real_probe_is_the_zipapp_copied_to_the_image():
    from envman.probe import APP_DIR, IN_IMAGE_PROBE
    from envman.probe.pyz import build_pyz

    ctx = render_stack(make_stack())
    assert ctx.files["envman/probe.pyz"] == build_pyz(APP_DIR)
    assert ctx.modes["envman/probe.pyz"] == 0o644
    copy = [args for name, args in instructions(ctx.dockerfile) if name == "COPY" and "envman/probe.pyz" in args]
    assert len(copy) == 1 and copy[0].split()[-1] == IN_IMAGE_PROBE.rsplit("/", 1)[0] + "/"


# --- network options -----------------------------------------------------------------------------


def test_registry_mirror_rewrites_docker_hub_images_only():
    m = "mirror.corp.example:5000/hub"
    assert mirror_image("nvidia/cuda:12.4.1-base-ubuntu22.04", m) == f"{m}/nvidia/cuda:12.4.1-base-ubuntu22.04"
    assert mirror_image("ubuntu:22.04", m) == f"{m}/library/ubuntu:22.04"
    assert mirror_image("docker.io/library/ubuntu:22.04", m) == f"{m}/library/ubuntu:22.04"
    assert mirror_image("nvcr.io/nvidia/pytorch:24.01-py3", m) == "nvcr.io/nvidia/pytorch:24.01-py3"
    digest = "sha256:" + "a" * 64
    assert mirror_image(f"ubuntu:22.04@{digest}", m) == f"{m}/library/ubuntu:22.04@{digest}"
    d = render(cpu_stack(), RenderOptions(registry_mirror=m)).dockerfile
    assert instructions(d)[0] == ("FROM", f"{m}/library/ubuntu:24.04")


def test_ca_bundle_reaches_apt_pip_and_uv(ca_file):
    ctx = render(make_stack(), RenderOptions(ca_bundle=ca_file))
    assert ctx.files["envman/ca-bundle.crt"] == PEM
    d = ctx.dockerfile
    assert f"COPY envman/ca-bundle.crt {CA_DEST}" in d
    assert d.count(f"apt-get -o Acquire::https::CAInfo={CA_DEST} ") == 2
    assert "update-ca-certificates;" in d
    envs = parse(d).envs
    for key in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        assert envs[key] == "/etc/ssl/certs/ca-certificates.crt"
    assert envs["UV_NATIVE_TLS"] == "1"
    ins = instructions(d)
    assert first_index(ins, lambda i: i[0] == "COPY" and "ca-bundle" in i[1]) < first_index(ins, lambda i: i[0] == "RUN")


def test_ca_bundle_must_be_pem(tmp_path):
    der = tmp_path / "cert.der"
    der.write_bytes(b"\x30\x82\x01\x0a")
    with pytest.raises(UserError, match="not PEM"):
        RenderOptions(ca_bundle=der)


def test_pip_index_replaces_pypi_and_framework_index_stays():
    o = RenderOptions(pip_index="https://pypi.corp.example/simple", pip_extra_index="https://extra.corp.example/simple")
    d = render(make_stack(), o).dockerfile
    envs = parse(d).envs
    assert envs["PIP_INDEX_URL"] == "https://pypi.corp.example/simple"
    assert envs["PIP_EXTRA_INDEX_URL"] == "https://extra.corp.example/simple"
    assert ("--index-url https://download.pytorch.org/whl/cu124 --extra-index-url https://pypi.corp.example/simple "
            "--extra-index-url https://extra.corp.example/simple torch==2.4.1") in d
    plain = render(make_stack(index_url=None), o).dockerfile
    assert "--index-url https://pypi.corp.example/simple --extra-index-url https://extra.corp.example/simple torch==2.4.1" in plain


def test_framework_index_replaces_the_stacks_own_source():
    o = RenderOptions(framework_index="https://torch.corp.example/whl/cu124")
    assert "--index-url https://torch.corp.example/whl/cu124 torch==2.4.1" in render(make_stack(), o).dockerfile
    links = make_stack(index_url=None, find_links="https://download.pytorch.org/whl/torch_stable.html")
    assert "--find-links https://download.pytorch.org/whl/torch_stable.html torch==2.4.1" in render(links).dockerfile
    assert "--find-links https://torch.corp.example/whl/cu124 torch==2.4.1" in render(links, o).dockerfile


@pytest.mark.parametrize("key", ["apt_mirror", "python_install_mirror"])
@pytest.mark.parametrize("url", ["https://user:secret@pypi.corp.example/simple", "https://token@pypi.corp.example/simple"])
def test_credentials_are_rejected(key, url):
    with pytest.raises(UserError, match="never bakes credentials into images"):
        RenderOptions(**{key: url})
    with pytest.raises(UserError, match="never bakes credentials"):
        RenderOptions(registry_mirror="user:pw@registry.corp.example")


@pytest.mark.parametrize("key", ["pip_index", "pip_extra_index", "framework_index"])
@pytest.mark.parametrize("url", ["https://user:s3cr%2Ft@pypi.corp.example/simple", "https://t0ken@pypi.corp.example/simple"])
def test_index_credentials_are_refused_on_the_classic_builder_saying_why(key, url):
    o = RenderOptions(**{key: url})
    assert "s3cr" not in json.dumps(o.describe()) and "t0ken" not in json.dumps(o.describe())
    with pytest.raises(RenderError, match="classic builder would keep them|classic builder would keep") as info:
        render(make_stack(), o)
    assert "s3cr" not in info.value.line() and "t0ken" not in info.value.line() and "\n" not in info.value.line()


def test_labels_carry_the_stack_not_the_network_options(wheelhouse, ca_file):
    everything = RenderOptions(
        registry_mirror="registry.corp.example:5000", ca_bundle=ca_file, pip_index="https://pypi.corp.example/simple",
        pip_extra_index="https://extra.corp.example/simple", framework_index="https://torch.corp.example/whl",
        wheelhouse=wheelhouse, offline=True, apt_mirror="http://apt.corp.example/ubuntu",
        python_install_mirror="https://pbs.corp.example/dl",
    )
    with_opts = parse(render(make_stack(), everything).dockerfile).labels
    plain = parse(render(make_stack()).dockerfile).labels
    assert {k: v for k, v in with_opts.items() if k != "envman.render-hash"} == {
        k: v for k, v in plain.items() if k != "envman.render-hash"}
    for value in with_opts.values():
        assert "corp.example" not in value


def test_wheelhouse_is_copied_sorted_and_installed_first(wheelhouse):
    ctx = render(make_stack(), RenderOptions(wheelhouse=wheelhouse))
    wheels = [n for n in ctx.files if n.startswith("wheels/")]
    assert wheels == sorted(wheels) and len(wheels) == 4  # README.txt is not a wheel
    d = ctx.dockerfile
    assert ("--no-index --no-deps /opt/envman/wheels/numpy-1.26.4-cp310-cp310-manylinux_2_17_x86_64.whl "
            "/opt/envman/wheels/torch-2.4.1-cp310-cp310-manylinux1_x86_64.whl "
            "/opt/envman/wheels/torchvision-0.19.1-py3-none-any.whl;") in d  # pip's wheel serves the pip step
    assert "--index-url https://download.pytorch.org/whl/cu124 --find-links /opt/envman/wheels torch==2.4.1" in d
    ins = instructions(d)
    # online: the wheels come after the Python layer, so new wheels do not rebuild it
    assert first_index(ins, lambda i: "-m venv" in i[1]) < first_index(ins, lambda i: i[0] == "COPY" and i[1].startswith("wheels/"))


def test_offline_installs_only_from_the_wheelhouse(wheelhouse):
    d = render(make_stack(), RenderOptions(wheelhouse=wheelhouse, offline=True)).dockerfile
    assert "-m pip install --no-cache-dir --no-index --find-links /opt/envman/wheels torch==2.4.1 torchvision==0.19.1" in d
    assert "--no-index --find-links /opt/envman/wheels --upgrade pip" in d  # pip from the wheelhouse too
    assert "download.pytorch.org/whl/cu124 torch" not in d
    ins = instructions(d)
    assert first_index(ins, lambda i: i[0] == "COPY" and i[1].startswith("wheels/")) < first_index(ins, lambda i: "-m venv" in i[1])


def test_offline_without_a_pip_wheel_keeps_the_bundled_pip(tmp_path):
    for name in ("torch-2.4.1-cp310-cp310-manylinux1_x86_64.whl", "torchvision-0.19.1-cp310-cp310-manylinux1_x86_64.whl"):
        (tmp_path / name).write_bytes(make_wheel(name, [])[0])
    d = render(make_stack(), RenderOptions(wheelhouse=tmp_path, offline=True)).dockerfile
    assert "bundled pip stays" in d and "--upgrade pip" not in d


def test_offline_needs_a_wheelhouse():
    with pytest.raises(UserError, match="needs a wheelhouse"):
        RenderOptions(offline=True)


def test_offline_standalone_needs_uv_and_a_python_mirror(wheelhouse):
    s = make_stack(python="3.12", python_strategy="standalone")
    (wheelhouse / "torch-2.4.1-py3-none-any.whl").write_bytes(make_wheel("torch-2.4.1-py3-none-any.whl", [])[0])
    with pytest.raises(RenderError, match=f"uv=={UV_VERSION}"):
        render(s, RenderOptions(wheelhouse=wheelhouse, offline=True))
    uv = f"uv-{UV_VERSION}-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    (wheelhouse / uv).write_bytes(make_wheel(uv, [])[0])
    with pytest.raises(RenderError, match="python-build-standalone mirror"):
        render(s, RenderOptions(wheelhouse=wheelhouse, offline=True))
    d = render(s, RenderOptions(wheelhouse=wheelhouse, offline=True, python_install_mirror="https://pbs.corp.example/dl")).dockerfile
    assert f"--ignore-requires-python --no-index --find-links /opt/envman/wheels uv=={UV_VERSION};" in d
    assert "wheels/uv-" not in d.split("# 3.")[1]  # the uv wheel is not forced into the venv


def test_empty_wheelhouse_is_an_error(tmp_path):
    with pytest.raises(RenderError, match="no \\*.whl"):
        render(make_stack(), RenderOptions(wheelhouse=tmp_path))


def test_apt_mirror_rewrites_both_source_formats_generically():
    d = render(cpu_stack(), RenderOptions(apt_mirror="http://apt.corp.example/ubuntu")).dockerfile
    assert "/etc/apt/sources.list; fi;" in d and "/etc/apt/sources.list.d/*.sources" in d
    assert "s#https?://[^[:space:]]+#http://apt.corp.example/ubuntu#" in d
    for host in ("archive.ubuntu.com", "security.ubuntu.com", "deb.debian.org", "ports.ubuntu.com"):
        assert host not in d
    # the rewrite comes before the first apt-get
    assert d.index("sed -i -E") < d.index("apt-get update")


def test_apt_mirror_sed_expressions_work(tmp_path):
    """Run the rendered sed expressions on copies of real-format source files."""
    if not shutil.which("sed"):
        pytest.skip("no sed")
    d = render(cpu_stack(), RenderOptions(apt_mirror="http://apt.corp.example/ubuntu")).dockerfile
    one_line = tmp_path / "sources.list"
    one_line.write_text(
        "# deb http://archive.ubuntu.com/ubuntu/ jammy main\n"
        "deb http://archive.ubuntu.com/ubuntu/ jammy main restricted\n"
        "deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] https://security.ubuntu.com/ubuntu jammy-security main\n"
        "deb-src http://archive.ubuntu.com/ubuntu/ jammy universe\n"
    )
    deb822 = tmp_path / "ubuntu.sources"
    deb822.write_text("Types: deb\nURIs: http://archive.ubuntu.com/ubuntu/ http://mirror2.example/ubuntu\nSuites: noble\n"
                      "Components: main\nSigned-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg\n")
    expr_list = d.split("sed -i -E '")[1].split("'")[0]
    expr_sources = d.split("sed -i -E '")[2].split("'")[0]
    subprocess.run(["sed", "-i", "-E", expr_list, str(one_line)], check=True)
    subprocess.run(["sed", "-i", "-E", expr_sources, str(deb822)], check=True)
    assert one_line.read_text().splitlines() == [
        "# deb http://archive.ubuntu.com/ubuntu/ jammy main",
        "deb http://apt.corp.example/ubuntu jammy main restricted",
        "deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] http://apt.corp.example/ubuntu jammy-security main",
        "deb-src http://apt.corp.example/ubuntu jammy universe",
    ]
    assert "URIs: http://apt.corp.example/ubuntu http://apt.corp.example/ubuntu\n" in deb822.read_text()


def test_https_apt_mirror_on_ubuntu1604_is_refused():
    s = make_stack(os="ubuntu16.04", python="3.5", cuda="10.0", minor_compat=False, min_driver="410.48",
                   base_image="nvidia/cuda:10.0-base-ubuntu16.04")
    with pytest.raises(RenderError, match="apt-transport-https"):
        render(s, RenderOptions(apt_mirror="https://apt.corp.example/ubuntu"))
    assert "apt.corp.example" in render(s, RenderOptions(apt_mirror="http://apt.corp.example/ubuntu")).dockerfile


def test_from_config_precedence(tmp_path, monkeypatch):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[network]\npip_index = "https://from-config.example/simple"\napt_mirror = "http://apt.config.example/u"\n')
    o = RenderOptions.from_config({"pip_index": "https://from-cli.example/simple", "apt_mirror": None}, config_file=cfg)
    assert o.pip_index == "https://from-cli.example/simple" and o.apt_mirror == "http://apt.config.example/u"
    o = RenderOptions.from_config({}, config_file=cfg, project={"apt_mirror": "http://apt.project.example/u"})
    assert o.apt_mirror == "http://apt.project.example/u"
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path))
    assert RenderOptions.from_config().pip_index == "https://from-config.example/simple"


# --- the CLI ---------------------------------------------------------------------------------------


def envman(*args, cwd=None, env=None):
    e = dict(os.environ)
    e.pop("ENVMAN_MATRIX", None)
    e.update(env or {})
    return run_envman(args, cwd=cwd, env=e)


def test_cli_help_renders():
    p = envman("render", "--help")
    assert p.returncode == 0, p.stderr
    for opt in ("--registry-mirror", "--ca-bundle", "--pip-index", "--wheelhouse", "--offline", "--apt-mirror", "--flavour"):
        assert opt in p.stdout


def test_cli_name_and_all_are_exclusive(tmp_path):
    env = {"ENVMAN_CONFIG_DIR": str(tmp_path)}
    for args in (["render"], ["render", "torch-2.4-cuda12", "--all"]):
        p = envman(*args, env=env)
        assert p.returncode == 2, p.stderr
        assert p.stderr.count("\n") == 1 and "not both and not neither" in p.stderr


def test_cli_bad_option_is_one_line_exit_2(tmp_path):
    p = envman("render", "torch-2.4-cuda12", "--builder", "classic", "--pip-index", "https://u:pw1@x.example/simple",
               env={"ENVMAN_CONFIG_DIR": str(tmp_path)})
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "credentials" in p.stderr and "pw1" not in p.stderr
    p = envman("render", "torch-2.4-cuda12", "--apt-mirror", "https://u:pw1@x.example/debian", env={"ENVMAN_CONFIG_DIR": str(tmp_path)})
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "credentials" in p.stderr and "pw1" not in p.stderr
    p = envman("render", "torch-2.4-cuda12", "--builder", "kaniko", env={"ENVMAN_CONFIG_DIR": str(tmp_path)})
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--builder" in p.stderr


@needs_shipped
def test_cli_writes_the_context_and_prints_path_and_hash(tmp_path):
    p = envman("render", "torch-2.4-cuda12.4", cwd=tmp_path, env={"ENVMAN_CONFIG_DIR": str(tmp_path / "cfg")})
    assert p.returncode == 0, p.stderr
    dest = tmp_path / "envman-context" / "torch-2.4.1-cuda12.4-py3.10"
    assert str(dest) in p.stdout
    h = verify_context(dest)
    assert f"render-hash {h}" in p.stdout


@needs_shipped
def test_cli_prints_the_dockerfile_and_applies_flavour(tmp_path):
    p = envman("render", "torch-2.4-cuda12.4", "--flavour", "devel", "-o", "-", env={"ENVMAN_CONFIG_DIR": str(tmp_path)})
    assert p.returncode == 0, p.stderr
    assert instructions(p.stdout)[0] == ("FROM", "nvidia/cuda:12.4.1-devel-ubuntu22.04")
    assert parse(p.stdout).labels["envman.name"].endswith("-devel")
    assert not (tmp_path / "envman-context").exists()


@needs_shipped
def test_cli_uses_the_user_config(tmp_path):
    (tmp_path / "config.toml").write_text('[network]\nregistry_mirror = "registry.corp.example"\n')
    p = envman("render", "torch-2.4-cpu", "-o", "-", env={"ENVMAN_CONFIG_DIR": str(tmp_path)})
    assert p.returncode == 0, p.stderr
    assert instructions(p.stdout)[0] == ("FROM", "registry.corp.example/library/ubuntu:24.04")


@needs_shipped
@pytest.mark.slow
def test_cli_renders_every_row(tmp_path):
    from envman.matrix.load import load_matrix

    p = envman("render", "--all", "-o", str(tmp_path / "all"), env={"ENVMAN_CONFIG_DIR": str(tmp_path / "cfg")})
    assert p.returncode == 0, p.stderr
    rows = load_matrix([], shipped=True).builds
    dirs = sorted((tmp_path / "all").iterdir())
    assert len(dirs) == len(rows)
    for d in dirs:
        assert (d / "Dockerfile").is_file() and (d / "envman" / "stack.json").is_file()
    verify_context(dirs[0])
    # one probe archive on disk, hard-linked into every context
    probes = {(d / PROBE_CONTEXT_FILE).stat().st_ino for d in dirs}
    assert len(probes) == 1 and (dirs[0] / PROBE_CONTEXT_FILE).stat().st_nlink == len(dirs)


def test_contexts_written_with_a_shared_pool_share_one_probe_file(tmp_path):
    """The probe is one inode across contexts; each context is still whole on its own (a plain
    file, replaced without touching the others); a pool entry that is gone is written again."""
    shared: dict = {}
    first = render_stack(make_stack(name="a-cpu"), probe=b"probe bytes")
    second = render_stack(make_stack(name="b-cpu"), probe=b"probe bytes")
    other = render_stack(make_stack(name="c-cpu"), probe=b"other probe")
    for ctx, d in ((first, "a"), (second, "b"), (other, "c")):
        ctx.write(tmp_path / d, shared)
    ino = {d: (tmp_path / d / PROBE_CONTEXT_FILE).stat().st_ino for d in "abc"}
    assert ino["a"] == ino["b"] != ino["c"]
    for d in "abc":
        assert not (tmp_path / d / PROBE_CONTEXT_FILE).is_symlink()
    first.write(tmp_path / "a", shared)  # replaced whole: b keeps its probe
    assert (tmp_path / "b" / PROBE_CONTEXT_FILE).read_bytes() == b"probe bytes"
    shutil.rmtree(tmp_path / "a")
    shutil.rmtree(tmp_path / "b")
    second.write(tmp_path / "b", shared)
    assert (tmp_path / "b" / PROBE_CONTEXT_FILE).read_bytes() == b"probe bytes"
    assert oct((tmp_path / "b" / PROBE_CONTEXT_FILE).stat().st_mode & 0o777) == oct(second.modes[PROBE_CONTEXT_FILE])


# --- golden files ------------------------------------------------------------------------------------


def _regen_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("regen_golden", ROOT / "scripts" / "regen-golden.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


@needs_shipped
def test_golden_dockerfiles_match_exactly(monkeypatch):
    monkeypatch.delenv("ENVMAN_MATRIX", raising=False)
    regen = _regen_module()
    rendered = regen.render_goldens()
    assert len(rendered) >= 7
    on_disk = {p.relative_to(regen.GOLDEN_DIR).as_posix() for d in regen.golden_dirs() for p in d.rglob("Dockerfile")}
    assert on_disk == set(rendered), "golden directories and goldens.toml disagree: run python scripts/regen-golden.py"
    for name, text in rendered.items():
        path = regen.GOLDEN_DIR / name
        assert path.read_text(encoding="utf-8") == text, f"{path} differs from a fresh render: run python scripts/regen-golden.py"


@needs_shipped
def test_goldens_cover_what_they_promise(monkeypatch):
    monkeypatch.delenv("ENVMAN_MATRIX", raising=False)
    rendered = _regen_module().render_goldens()
    names = {n.split("/")[0] for n in rendered}
    assert "torch-1.0.1-cuda10.0-py3.6" in names
    # the mission's own stack: NVIDIA deleted its base, so it is rebuilt from NVIDIA's recipe, on both builders
    for d in ("torch-1.0.1-cuda10.0-py3.6", "torch-1.0.1-cuda10.0-py3.6.buildkit"):
        assert "FROM envman/base:10.0-base-ubuntu18.04\n" in rendered[f"{d}/Dockerfile"]
        assert rendered[f"{d}/base/Dockerfile"].splitlines()[5].startswith("# 10.0-base-ubuntu18.04: ")
        assert "\nFROM ubuntu:18.04 AS " in rendered[f"{d}/base/Dockerfile"]
    # a served base is pulled as before: no base/Dockerfile
    assert not any(n.endswith("/base/Dockerfile") and "cuda12" in n for n in rendered)
    assert any(n.startswith("torch-2.") and "-cuda12" in n for n in names)
    assert any(n.startswith("tensorflow-1.") for n in names) and any(n.startswith("tensorflow-2.") for n in names)
    assert any(n.startswith("jax-") for n in names) and any("-cpu-" in n for n in names)
    assert any(("standalone" in t and "--no-index" in t and "PIP_CERT" in t and "sed -i" in t) for t in rendered.values())


# --- the entrypoint --------------------------------------------------------------------------------

ENTRYPOINT = ROOT / "templates" / "dockerfiles" / "entrypoint.sh"


def test_entrypoint_is_posix_sh_and_execs_the_command():
    sh = shutil.which("dash") or shutil.which("sh")
    if sh is None:
        pytest.skip("no POSIX sh here")
    subprocess.run([sh, "-n", str(ENTRYPOINT)], check=True)
    fallback = Path(f"/tmp/envman-home-{os.getuid()}")
    existed = fallback.exists()
    try:
        p = subprocess.run([sh, str(ENTRYPOINT), "sh", "-c", 'echo "$HOME"; exit 7'], capture_output=True, text=True,
                           env={**os.environ, "HOME": "/nonexistent-envman-home"})
        assert p.returncode == 7  # exec'd: the command's own exit status
        assert p.stdout.strip().startswith(str(fallback))  # unwritable HOME: the fallback
    finally:
        if not existed:
            shutil.rmtree(fallback, ignore_errors=True)
