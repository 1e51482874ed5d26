"""A stack image's Dockerfile plan (envman/render/plan.py): which sections it has, what they hold
for torch, TensorFlow and a CPU stack, on either builder and with the network options."""

from __future__ import annotations


from envman import labels as L
from envman.render import imagepaths as IP
from envman.render import sections as S
from envman.render.dockerfile import render_stack
from envman.render.options import RenderOptions
from envman.render.plan import stack_plan
from envman.render.steps import CacheMount
from envman.render.template import render_dockerfile
from tests.unit.render.test_dockerfile import PROBE, cpu_stack, make_stack

BASE_ID = "sha256:" + "c" * 64


def tf_stack():
    """TensorFlow 1.15 on a cudnn base: CUDA from the base image's system libraries, no pip index."""
    return make_stack(
        name="tensorflow-1.15.0-cuda10.0-py3.6", row="tensorflow-1.15.0-cuda10.0", framework="tensorflow",
        framework_version="1.15.0", variant="gpu", cuda="10.0", python="3.6", os="ubuntu18.04",
        base_image="nvidia/cuda:10.0-cudnn7-runtime-ubuntu18.04", min_driver="410.48", minor_compat=False,
        minor_compat_status=None, packages=("tensorflow-gpu==1.15.0",), index_url=None,
    )


# --- stack images ------------------------------------------------------------------------------


def test_torch_from_the_pytorch_index_has_every_stack_section():
    plan = stack_plan(make_stack(), RenderOptions(), [])
    assert plan.template == "Dockerfile.j2" and plan.project is None
    assert plan.base == S.BaseImage("nvidia/cuda:12.4.1-base-ubuntu22.04", "nvidia/cuda:12.4.1-base-ubuntu22.04", None)
    assert plan.os_packages is not None and plan.os_packages.hide_nvidia_sources
    assert plan.os_packages.packages == ("ca-certificates", "python3.10", "python3.10-venv")
    assert plan.python is not None and (plan.python.strategy, plan.python.exe) == ("apt", "python3.10")
    assert plan.framework is not None and plan.framework.installer == "pip" and plan.framework.uv is None
    assert plan.framework.pip_args == ("--index-url", "https://download.pytorch.org/whl/cu124", "torch==2.4.1",
                                       "torchvision==0.19.1")
    assert plan.nvidia is not None and ("NVIDIA_REQUIRE_CUDA", "driver>=525.60.13") in plan.nvidia.env
    assert plan.wheelhouse is None and plan.envman_files is not None


def test_tensorflow_on_system_cuda_needs_the_driver_to_support_its_cuda():
    plan = stack_plan(tf_stack(), RenderOptions(), [])
    assert plan.nvidia is not None and ("NVIDIA_REQUIRE_CUDA", "cuda>=10.0") in plan.nvidia.env
    assert plan.framework is not None and plan.framework.pip_args == ("tensorflow-gpu==1.15.0",)  # PyPI, no index options
    assert plan.os_packages is not None and "python3-distutils" in plan.os_packages.packages  # Ubuntu 18.04
    assert plan.python is not None and plan.python.pip_upgrade == ("--upgrade", "pip<22")


def test_a_cpu_stack_has_no_nvidia_section_and_leaves_apt_sources_alone():
    plan = stack_plan(cpu_stack(), RenderOptions(), [])
    assert plan.nvidia is None
    assert plan.os_packages is not None and not plan.os_packages.hide_nvidia_sources
    assert plan.base.from_image == "ubuntu:24.04"


def test_buildkit_moves_caches_into_mounts_and_installs_with_uv_from_python_3_8():
    classic = stack_plan(make_stack(), RenderOptions(), [], "classic")
    bk = stack_plan(make_stack(), RenderOptions(), [], "buildkit")
    assert (classic.builder.kind, classic.builder.buildkit, bk.builder.buildkit) == ("classic", False, True)
    assert classic.builder.pip_cache == ("--no-cache-dir",) and bk.builder.pip_cache == ("--cache-dir", IP.PIP_CACHE)
    assert bk.os_packages is not None and not bk.os_packages.clean_lists
    assert [type(m) for m in bk.os_packages.mounts] == [CacheMount, CacheMount]
    assert classic.os_packages is not None and classic.os_packages.mounts == ()
    assert bk.framework is not None and bk.framework.installer == "uv" and bk.framework.uv is not None
    assert bk.framework.uv.args == ("--index-strategy", "unsafe-best-match", *classic.framework.pip_args)  # type: ignore[union-attr]
    old = stack_plan(tf_stack(), RenderOptions(), [], "buildkit")
    assert old.framework is not None and (old.framework.installer, old.framework.uv) == ("pip", None)


def test_network_options_land_in_their_sections(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    opts = RenderOptions(registry_mirror="mirror.example:5000", ca_bundle=ca, pip_index="https://pypi.example/simple",
                         apt_mirror="http://apt.example/ubuntu")
    plan = stack_plan(make_stack(), opts, [])
    assert plan.base.from_image == "mirror.example:5000/nvidia/cuda:12.4.1-base-ubuntu22.04"
    assert plan.network is not None and plan.network.ca_copy_dest == IP.CA_DEST and len(plan.network.ca_env) == 4
    assert plan.network.pip_env == (("PIP_INDEX_URL", "https://pypi.example/simple"),)
    assert plan.os_packages is not None and plan.os_packages.mirror == "http://apt.example/ubuntu"
    assert plan.os_packages.update_ca_certificates
    bk = stack_plan(make_stack(), opts, [], "buildkit")
    assert bk.network is not None and bk.network.ca_copy_dest is None and bk.network.ca_env == ()  # bind-mounted per step instead
    assert bk.builder.ca_source == IP.CA_MOUNT and bk.builder.step_env == IP.CA_STEP_ENV and bk.builder.step_setup
    assert dict(IP.CA_STEP_ENV) == {k: IP.CA_MERGED for k in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")}


def test_the_labels_section_holds_exactly_the_stack_labels_of_envman_labels():
    plan = stack_plan(make_stack(), RenderOptions(), [])
    names = tuple(label.name for label in plan.labels)
    assert names == IP.STACK_LABELS == (L.MANAGED, L.NAME, L.STACK, L.VERSION)
    module_names = {v for k, v in vars(L).items() if k.isupper() and isinstance(v, str) and v.startswith(L.PREFIX)}
    assert set(names) <= module_names
    assert dict((label.name, label.value) for label in plan.labels)[L.MANAGED] == L.TRUE
    body = render_stack(make_stack(), RenderOptions(), probe=PROBE).dockerfile
    assert body.rsplit("\n", 2)[-2].startswith(f"LABEL {L.RENDER_HASH}=")  # the render hash comes last, alone


def test_stack_dockerfile_is_the_rendered_plan_plus_the_render_hash_line():
    stack = make_stack()
    ctx = render_stack(stack, RenderOptions(), probe=PROBE)
    body = render_dockerfile(stack_plan(stack, RenderOptions(), []))
    assert ctx.dockerfile == body + f'LABEL {L.RENDER_HASH}="{ctx.render_hash}"\n'
