"""Every URL of every matrix (a base recipe's apt repositories, key, downloads and archive; a
framework row's indexes) follows the index URLs' rules: nothing token-like in it, no
user:token@, no query; and no refusal echoes the token (envman.matrix.load, envman.config)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envman.errors import EnvmanError
from envman.matrix.load import load_matrix
from envman.matrix.validate import validate

DATA = Path(__file__).resolve().parents[2] / "data"
TOKENS = ("ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "glpat-" + "xY9zW8vU7tS6rQ5pO4nM",
          "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345")
RECIPE_URLS = ('repositories = ["https://developer.download.nvidia.com/compute/cuda/repos/ubuntu1804/x86_64"]',
               'key_url = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu1804/x86_64/3bf863cc.pub"')


def _mini(tmp_path: Path, recipes: str | None = None, rest: str | None = None) -> list[Path]:
    files = []
    for f in sorted(DATA.glob("mini*.toml")):
        text = f.read_text()
        text = recipes if recipes is not None and f.name == "mini-recipes.toml" else text
        text = rest if rest is not None and f.name == "mini-rest.toml" else text
        (tmp_path / f.name).write_text(text)
        files.append(tmp_path / f.name)
    return files


@pytest.mark.parametrize("token", TOKENS)
@pytest.mark.parametrize("line", RECIPE_URLS)
@pytest.mark.parametrize("where", ["a path segment", "a host label"])
def test_a_token_anywhere_in_a_recipe_url_is_refused_and_never_echoed(tmp_path, token, line, where):
    original = (DATA / "mini-recipes.toml").read_text()
    assert line in original
    url = re.search(r'"(https://[^"]+)"', line).group(1)
    hostile = url.replace("/compute/", f"/{token}/compute/") if where == "a path segment" else \
        url.replace("https://", f"https://{token.lower().replace('_', '-')}.")
    with pytest.raises(EnvmanError) as e:
        load_matrix(_mini(tmp_path, recipes=original.replace(url, hostile, 1)), shipped=False)
    assert token not in str(e.value) and token.lower() not in str(e.value).lower()
    assert "\n" not in str(e.value) and "mini-recipes.toml" in e.value.where


def test_the_recipe_urls_as_shipped_are_accepted():
    load_matrix()  # NVIDIA's repositories, keys, .deb downloads and old-releases over plain http


@pytest.mark.parametrize("token", TOKENS)
@pytest.mark.parametrize("key", ["index_url", "find_links"])
def test_a_token_in_a_framework_row_s_url_is_a_validation_problem_that_hides_it(tmp_path, token, key):
    rest = (DATA / "mini-rest.toml").read_text()
    row = 'packages = ["torch==2.4.1+cpu"]\n'
    assert row in rest
    hostile = rest.replace(row, row + f'{key} = "https://download.example/{token}/whl"\n', 1)
    problems = validate(load_matrix(_mini(tmp_path, rest=hostile), shipped=False))
    found = [p for p in problems if "token" in str(p)]
    assert found and not any(token in str(p) for p in problems)
