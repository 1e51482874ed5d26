"""Where things go in the image (envman/render/imagepaths.py): the places the plan, its sections and
the layout share, each where the others expect it."""

from __future__ import annotations

from envman.probe.app.contract import IMAGE_DIR, PROBE_FILE
from envman.render import imagepaths as IP


def test_envmans_directories_sit_under_the_probes_image_directory():
    assert IP.ENVMAN_DIR == IMAGE_DIR
    for d in (IP.WHEELS_DIR, IP.PYTHON_DIR, IP.PROJECT_DIR):
        assert d.startswith(IP.ENVMAN_DIR + "/") and d != IP.ENVMAN_DIR


def test_the_build_caches_sit_under_one_root_and_uv_is_found_by_its_pinned_version():
    for d in (IP.PIP_CACHE, IP.UV_CACHE, IP.APT_ARCHIVES, IP.TOOLS_CACHE):
        assert d.startswith(IP.CACHE_ROOT + "/")
    assert IP.UV_TOOL == f"{IP.TOOLS_CACHE}/uv-{IP.UV_VERSION}"


def test_the_wheel_store_url_is_its_host_and_port():
    assert IP.WHEEL_STORE_URL == f"http://{IP.WHEEL_STORE_HOST}:{IP.WHEEL_STORE_PORT}/"
    assert 1024 < IP.WHEEL_STORE_PORT < 65536


def test_the_context_files_copy_the_probe_and_a_step_trusts_the_merged_bundle():
    assert IP.PROBE_CONTEXT_FILE == f"envman/{PROBE_FILE}" and IP.PROBE_CONTEXT_FILE in IP.ENVMAN_FILES
    assert all(f.startswith("envman/") for f in IP.ENVMAN_FILES)
    assert {value for _, value in IP.CA_STEP_ENV} == {IP.CA_MERGED}
    assert set(IP.BUILDER_KINDS) == {"classic", "buildkit"}
    assert IP.SETTLED_TIME == 315532800  # 1980-01-01T00:00:00Z: the earliest a zip entry can carry
