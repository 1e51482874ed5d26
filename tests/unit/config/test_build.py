"""config.toml's [build] table: one typed value (BuildConfig), each key checked with one wording
(what, the file and key, how to fix; exit 2), hostile values refused in one line."""

from __future__ import annotations

import dataclasses

import pytest

from envman.config import BuildConfig, load_base_config, load_build_config, load_build_network, load_builder_config
from envman.config.build import BUILD_NETWORKS, BUILDERS, one_of
from envman.errors import UserError


def write(tmp_path, text):
    p = tmp_path / "config.toml"
    p.write_text(text, encoding="utf-8")
    return p


def test_absent_file_and_empty_table_give_the_defaults(tmp_path):
    assert load_build_config(tmp_path / "absent.toml") == BuildConfig("auto", "auto", None)
    assert load_build_config(write(tmp_path, "[build]\n")) == BuildConfig()


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("base", ["auto", "pull", "rebuild"])
@pytest.mark.parametrize("network", BUILD_NETWORKS)
def test_every_accepted_value_comes_back_typed(tmp_path, builder, base, network):
    cfg = write(tmp_path, f'[build]\nbuilder = "{builder}"\nbase = "{base}"\nnetwork = "{network}"\n')
    got = load_build_config(cfg)
    assert got == BuildConfig(builder, base, None if network == "default" else network)
    # the one-key loaders read the same typed table
    assert (load_builder_config(cfg), load_base_config(cfg), load_build_network(cfg)) == (got.builder, got.base,
                                                                                          got.network)


def test_the_table_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        BuildConfig().builder = "classic"  # type: ignore[misc]


@pytest.mark.parametrize("key,value,fix", [
    ("builder", '"buildx"', 'write builder = "auto", "buildkit" or "classic"'),
    ("builder", "3", 'write builder = "auto", "buildkit" or "classic"'),
    ("builder", '["classic"]', 'write builder = "auto", "buildkit" or "classic"'),
    ("builder", '"Classic"', 'write builder = "auto", "buildkit" or "classic"'),  # exact, not case-folded
    ("builder", '"classic "', 'write builder = "auto", "buildkit" or "classic"'),  # one character past
    ("network", '"bridge"', 'write network = "default" or "host"'),
    ("network", "true", 'write network = "default" or "host"'),
    ("network", '{ mode = "host" }', 'write network = "default" or "host"'),
    ("base", '"never"', "use auto, pull or rebuild (--base, or base in [build] of config.toml)"),
    ("base", "1", "use auto, pull or rebuild (--base, or base in [build] of config.toml)"),
])
def test_a_bad_value_is_one_line_naming_the_file_the_key_and_the_fix(tmp_path, key, value, fix):
    cfg = write(tmp_path, f"[build]\n{key} = {value}\n")
    with pytest.raises(UserError) as e:
        load_build_config(cfg)
    line = e.value.line()
    assert line.startswith(f"{cfg}: [build].{key}: ") and line.endswith(fix) and "\n" not in line
    assert e.value.exit_code == 2


def test_control_characters_in_a_value_or_a_key_never_break_the_line(tmp_path):
    cfg = write(tmp_path, '[build]\nbuilder = "classic\\u001b[31m\\nred"\n')
    with pytest.raises(UserError) as e:
        load_build_config(cfg)
    line = e.value.line()
    assert "\n" not in line and "\x1b" not in line and "[build].builder" in line
    cfg = write(tmp_path, '[build]\n"net\\u001bwork" = "host"\n')
    with pytest.raises(UserError) as e:
        load_build_config(cfg)
    line = e.value.line()
    assert "unknown key build.net" in line and "\x1b" not in line and "known keys in [build]: builder, base, network" in line


def test_one_of_is_the_one_wording_of_a_choice():
    assert one_of("builder", "auto", BUILDERS, where="w") == "auto"
    with pytest.raises(UserError) as e:
        one_of("builder", None, BUILDERS, where="w")
    assert e.value.line() == 'w: builder None is not one of auto, buildkit, classic — write builder = "auto", "buildkit" or "classic"'
