"""The options shared by commands, declared once (envman/cli/_options.py): an option group shown to
typer as its fields in place and handed to the command as one value; --platform, --builder and
--base read over the user config, a bad value one error naming its option."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Annotated, Optional

import pytest
import typer
from typer.testing import CliRunner

from envman.cli._options import BuildFlags, base_preference, builder_preference, option_group, platform_option
from envman.errors import UserError


@dataclasses.dataclass(frozen=True)
class Group:
    alpha: Annotated[Optional[str], typer.Option("--alpha")] = None
    beta: Annotated[int, typer.Option("--beta")] = 2


def test_a_group_is_shown_as_its_fields_in_place_and_passed_as_one_value():
    seen = []

    @option_group("opts", Group)
    def command(first: str, opts: Group, last: bool = False) -> None:
        seen.append((first, opts, last))

    assert list(inspect.signature(command).parameters) == ["first", "alpha", "beta", "last"]
    app = typer.Typer()
    app.command()(command)
    result = CliRunner().invoke(app, ["x", "--alpha", "a", "--last"])
    assert result.exit_code == 0, result.output
    assert seen == [("x", Group(alpha="a", beta=2), True)]
    command("y", alpha=None, beta=5)  # called directly: the fields as keywords
    assert seen[-1] == ("y", Group(None, 5), False)


def test_a_group_for_a_parameter_the_command_lacks_is_a_type_error():
    with pytest.raises(TypeError, match="has no parameter 'opts'"):
        option_group("opts", Group)(lambda other: None)


def test_platform_is_read_as_an_oci_platform():
    assert platform_option(None) is None
    assert platform_option("arm64") == "linux/arm64" == platform_option("linux/arm64")
    with pytest.raises(UserError):
        platform_option("linux/sparc; id")


def test_builder_and_base_come_from_the_flag_else_the_config(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path))
    assert builder_preference(None) == "auto" and base_preference(None) == "auto"
    (tmp_path / "config.toml").write_text('[build]\nbuilder = "classic"\nbase = "pull"\n')
    assert builder_preference(None) == "classic" and base_preference(None) == "pull"
    assert builder_preference("buildkit") == "buildkit" and base_preference("rebuild") == "rebuild"
    flags = BuildFlags(builder="buildkit")
    assert flags.builder_preference() == "buildkit" and flags.base_mode() == "pull"


@pytest.mark.parametrize("call, where", [(lambda: builder_preference("kaniko"), "--builder"),
                                         (lambda: base_preference("latest"), "--base")])
def test_a_builder_or_base_that_is_not_one_is_refused_naming_its_option(tmp_path, monkeypatch, call, where):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path))
    with pytest.raises(UserError) as e:
        call()
    assert e.value.where == where and "\n" not in e.value.line()
