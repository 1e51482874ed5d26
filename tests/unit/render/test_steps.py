"""Dockerfile steps (envman.render.steps): the one place a RUN, its --mount flags and its line
continuations are written, and what a step refuses so that its shape cannot change."""

from __future__ import annotations

import dataclasses
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envman.errors import RenderError
from envman.render import steps as S
from envman.render.steps import (
    AddStep, ArgStep, BindMount, Blank, CacheMount, Comment, CopyStep, EnvStep, ExecStep, FromStep, If,
    LabelStep, OrElse, RunStep, SecretMount, UserStep, paragraphs,
)

# --- RUN ---------------------------------------------------------------------------------------


def test_a_sequence_run_ends_every_line_but_the_last_with_a_semicolon_continuation():
    step = RunStep(("set -eu", "a", "b"))
    assert step.text == "RUN set -eu; \\\n    a; \\\n    b"


def test_mount_flags_come_one_per_line_before_the_commands():
    step = RunStep(("set -eu", "a"), mounts=(CacheMount("envman-pip", "/var/cache/envman/pip"),
                                            CacheMount("apt", "/var/lib/apt/lists", "locked"),
                                            BindMount("wheels", "/opt/envman/wheels"),
                                            SecretMount("envman-netrc", "/root/.netrc")))
    assert step.text == (
        "RUN --mount=type=cache,id=envman-pip,target=/var/cache/envman/pip \\\n"
        "    --mount=type=cache,id=apt,target=/var/lib/apt/lists,sharing=locked \\\n"
        "    --mount=type=bind,source=wheels,target=/opt/envman/wheels \\\n"
        "    --mount=type=secret,id=envman-netrc,target=/root/.netrc,mode=0400 \\\n"
        "    set -eu; \\\n    a")


def test_if_and_or_else_nest_by_four_and_only_commands_take_a_semicolon():
    step = RunStep(("set -eu", If("[ -x u ]", ("x", If("c", ("y",), ("z",)))), OrElse("p", ("q", "r")), "last"))
    assert step.text == (
        "RUN set -eu; \\\n"
        "    if [ -x u ]; then \\\n"
        "        x; \\\n"
        "        if c; then \\\n"
        "            y; \\\n"
        "        else \\\n"
        "            z; \\\n"
        "        fi; \\\n"
        "    fi; \\\n"
        "    p \\\n"
        "    || { q; \\\n"
        "         r; }; \\\n"
        "    last")


@pytest.mark.parametrize("chain, text", [
    ("and", "RUN a && \\\n    b && \\\n    c"),
    ("and-leading", "RUN a \\\n && b \\\n && c"),
])
def test_the_and_chains(chain, text):
    assert RunStep(("a", "b", "c"), chain=chain).text == text
    assert RunStep(("a",), chain=chain).text == "RUN a"


def test_only_a_sequence_takes_if_and_or_else():
    for chain in ("and", "and-leading"):
        for compound in (If("c", ("x",)), OrElse("p", ("q",))):
            with pytest.raises(RenderError):
                RunStep(("a", compound), chain=chain).text  # noqa: B018


# Commands over a tiny alphabet: true/false conditions and `echo N`, so that sh can run the body.
_word = st.integers(0, 99).map(lambda n: f"echo {n}")
_commands = st.recursive(
    _word,
    lambda inner: st.one_of(
        st.builds(If, st.sampled_from(["true", "false"]), st.lists(inner, min_size=1, max_size=3).map(tuple),
                  st.lists(inner, max_size=3).map(tuple)),
        st.builds(OrElse, st.sampled_from(["true", "false"]), st.lists(_word, min_size=1, max_size=3).map(tuple)),
    ),
    max_leaves=8,
)


def _expected(commands) -> list[str]:
    out: list[str] = []
    for c in commands:
        if isinstance(c, str):
            out.append(c.split()[1])
        elif isinstance(c, If):
            out += _expected(c.then if c.condition == "true" else c.otherwise)
        elif c.command == "false":
            out += [w.split()[1] for w in c.fallback]
    return out


@settings(max_examples=40, deadline=None)
@given(st.lists(_commands, min_size=1, max_size=5))
def test_a_sequence_run_is_the_shell_program_its_steps_describe(commands):
    """Docker joins a RUN's continued lines (backslash-newline dropped); sh then runs exactly the
    commands the tree says, in order."""
    text = RunStep(("set -eu", *commands)).text
    assert text.startswith("RUN ")
    body = text[len("RUN "):].replace("\\\n", "")
    out = subprocess.run(["sh", "-c", body], capture_output=True, text=True, check=True).stdout.split()
    assert out == _expected(commands)


# --- the other instructions --------------------------------------------------------------------


@pytest.mark.parametrize("step, text", [
    (Comment(("one", "two")), "# one\n# two"),
    (Blank(), ""),
    (FromStep("ubuntu:24.04"), "FROM ubuntu:24.04"),
    (FromStep("ubuntu:24.04", platform="linux/arm64", stage="os"), "FROM --platform=linux/arm64 ubuntu:24.04 AS os"),
    (ArgStep("DEBIAN_FRONTEND", "noninteractive"), "ARG DEBIAN_FRONTEND=noninteractive"),
    (EnvStep(("A=1", 'B="two"')), 'ENV A=1 \\\n    B="two"'),
    (LabelStep(('a="1"', 'b="2"')), 'LABEL a="1" \\\n      b="2"'),
    (CopyStep(("a", "b"), "/opt/"), "COPY a b /opt/"),
    (AddStep("envman/mount-points.tar", "/"), "ADD envman/mount-points.tar /"),
    (UserStep("root"), "USER root"),
    (ExecStep("ENTRYPOINT", ("/opt/envman/entrypoint.sh",)), 'ENTRYPOINT ["/opt/envman/entrypoint.sh"]'),
    (ExecStep("CMD", ("python", "-V")), 'CMD ["python", "-V"]'),
])
def test_each_instruction(step, text):
    assert step.text == text


def _string_fields(step):
    """Every way to put a newline into one string value of ``step`` (field name, changed step)."""
    for f in dataclasses.fields(step):
        value = getattr(step, f.name)
        if isinstance(value, str):
            yield f.name, dataclasses.replace(step, **{f.name: value + "\nRUN id"})
        elif isinstance(value, tuple) and value and all(isinstance(v, str) for v in value):
            yield f.name, dataclasses.replace(step, **{f.name: (*value[:-1], value[-1] + "\nRUN id")})


EVERY_STEP = [
    Comment(("c",)), FromStep("img", "linux/arm64", "stage"), ArgStep("A", "1"), EnvStep(("A=1",)),
    LabelStep(('a="1"',)), CopyStep(("a",), "/b"), AddStep("a.tar", "/"), UserStep("root"), ExecStep("ENTRYPOINT", ("/e",)), ExecStep("CMD", ("c",)),
    RunStep(("a", "b")), RunStep(("a", If("c", ("x",), ("y",)), OrElse("p", ("q",)))),
]


def test_every_kind_of_step_is_in_the_table():
    assert {type(s) for s in EVERY_STEP} | {Blank} == set(S.Step.__args__)  # type: ignore[attr-defined]


@pytest.mark.parametrize("step", EVERY_STEP, ids=lambda s: type(s).__name__)
def test_a_newline_in_any_value_is_refused_not_written(step):
    """A newline would end the instruction and start one the plan never asked for."""
    variants = list(_string_fields(step))
    if isinstance(step, RunStep):
        variants += [(f"command {i}", dataclasses.replace(step, commands=tuple(
            (dataclasses.replace(c, **{f.name: getattr(c, f.name) + "\nRUN id" for f in dataclasses.fields(c)
                                       if isinstance(getattr(c, f.name), str)}) if not isinstance(c, str)
             else c + "\nRUN id") if j == i else c for j, c in enumerate(step.commands))))
            for i in range(len(step.commands))]
    assert variants
    for name, changed in variants:
        with pytest.raises(RenderError):
            changed.text  # noqa: B018
        assert name


@pytest.mark.parametrize("value", ["a,b", "a=b", "a b", "a\nb", "", "$(id)", "a;b"])
@pytest.mark.parametrize("make", [
    lambda v: CacheMount(v, "/t"), lambda v: CacheMount("id", v), lambda v: BindMount(v, "/t"),
    lambda v: BindMount("s", v), lambda v: SecretMount(v, "/t"), lambda v: SecretMount("id", v),
    lambda v: SecretMount("id", "/t", v),
])
def test_a_mount_option_that_is_not_a_plain_path_or_id_is_refused(make, value):
    with pytest.raises(RenderError):
        RunStep(("a",), mounts=(make(value),)).text  # noqa: B018


def test_paragraphs_put_one_blank_line_between_non_empty_blocks():
    a, b = Comment(("a",)), Comment(("b",))
    assert paragraphs([a], [], (b,), []) == (a, Blank(), b)
    assert paragraphs([], []) == ()


def test_steps_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        RunStep(("a",)).chain = "and"  # type: ignore[misc]
