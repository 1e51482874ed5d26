"""Quoting and image references (envman/render/quote.py): a LABEL/ENV value quoted so every Docker
lexer reads it back exactly, or refused; words for /bin/sh; the stack label's JSON; a base image
reference parsed strictly and sent through a Docker Hub mirror."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, strategies as st

from envman.errors import RenderError
from envman.render.quote import (
    check_dockerfile_value, dockerfile_quote, mirror_image, parse_image_ref, sh_double_quoted, sh_word, sh_words,
    stack_label_json,
)
from tests.unit.render.test_dockerfile import make_stack, parse


def docker_unquote(word: str, *, legacy: bool = False) -> str:
    """What Docker's lexer makes of a double-quoted LABEL/ENV word (no variables defined).

    Modern (BuildKit's shell lexer, Docker 17+): inside double quotes ``\\`` escapes ``"``,
    ``$`` and ``\\``; other backslashes stay. ``legacy``: lexers that unescaped only ``"`` and
    ``$`` (and dockerfile-parse, which unescapes ``"`` only).
    """
    assert word[0] == '"' and word[-1] == '"'
    body, out, i = word[1:-1], [], 0
    specials = '"$' if legacy else '"$\\'
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body) and body[i + 1] in specials:
            out.append(body[i + 1])
            i += 2
            continue
        assert ch != '"', "an unescaped quote would end the word"
        assert ch != "$", "an unescaped $ would expand a variable"
        out.append(ch)
        i += 1
    return "".join(out)


PRINTABLE = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60)


def test_dockerfile_quote_examples():
    assert dockerfile_quote("plain") == '"plain"'
    assert dockerfile_quote('a"b') == '"a\\"b"'
    assert dockerfile_quote("$HOME") == '"\\$HOME"'
    assert dockerfile_quote("a\\b") == '"a\\b"'  # before an ordinary char: as is, for every lexer
    assert dockerfile_quote("a\\") == '"a\\\\"'
    assert dockerfile_quote('\\"') == '"\\\\\\""'


@pytest.mark.parametrize("bad", ["a\nLABEL x=1", "a\r", "tab\there", "nul\x00", "del\x7f", "caf\u00e9", "ls\u2028"])
def test_dockerfile_quote_rejects_what_cannot_be_carried(bad):
    with pytest.raises(RenderError, match="cannot carry"):
        dockerfile_quote(bad)


@given(PRINTABLE)
def test_dockerfile_quote_round_trips(value):
    q = dockerfile_quote(value)
    assert "\n" not in q
    assert docker_unquote(q) == value
    if not re.search(r'\\(?=["$\\]|$)', value):  # no backslash where lexers disagree
        assert docker_unquote(q, legacy=True) == value
    if "$" not in value and not re.search(r'\\(?=["$\\]|$)', value):
        assert parse(f"FROM x:1\nLABEL k={q}\n").labels["k"] == value  # dockerfile-parse too


@given(st.text(max_size=80))
def test_stack_json_label_reads_back_with_every_lexer(note):
    s = make_stack(notes=(note,), sources=(note,))
    text = stack_label_json(s)
    assert json.loads(text) == s.to_json()
    assert not re.search(r'\\(?!u[0-9a-f]{4}|[nrtbf/])', text)  # only \uXXXX and letter escapes
    assert "$" not in text
    q = dockerfile_quote(text)
    assert json.loads(docker_unquote(q)) == json.loads(docker_unquote(q, legacy=True)) == s.to_json()


@pytest.mark.parametrize("value, ok", [(" ", True), ("~", True), ("\x1f", False), ("\x7f", False), ("", True)])
def test_a_dockerfile_value_is_printable_ascii_from_space_to_tilde(value, ok):
    if ok:
        assert check_dockerfile_value(value, what="label x") == value
    else:
        with pytest.raises(RenderError) as e:
            check_dockerfile_value(value, what="label x")
        assert e.value.what.startswith("label x contains ")


def test_a_dockerfile_value_that_is_not_a_string_is_refused_naming_its_type():
    with pytest.raises(RenderError, match="label x must be a string, got int"):
        check_dockerfile_value(3, what="label x")  # type: ignore[arg-type]


@pytest.mark.parametrize("word", ["plain", "a b", "it's", "$(id)", "`id`", "x;y", ""])
def test_sh_words_read_back_as_the_same_words(word):
    import shlex

    assert shlex.split(sh_word(word)) == [word]
    assert shlex.split(sh_words([word, "--flag", word])) == [word, "--flag", word]


@pytest.mark.parametrize("word", ['a"b', "$HOME", "`id`", "a\\b", "a\nb"])
def test_sh_double_quoted_refuses_what_sh_reads_inside_double_quotes(word):
    with pytest.raises(RenderError, match="cannot be written in double quotes"):
        sh_double_quoted(word)


def test_sh_double_quoted_keeps_spaces_and_single_quotes():
    assert sh_double_quoted("it's a word") == "\"it's a word\""


@pytest.mark.parametrize("ref, registry, path, tag, digest", [
    ("ubuntu:22.04", None, "ubuntu", "22.04", None),
    ("nvidia/cuda:12.4.1-base-ubuntu22.04", None, "nvidia/cuda", "12.4.1-base-ubuntu22.04", None),
    ("localhost/x:1", "localhost", "x", "1", None),
    ("reg.example:5000/a/b:t", "reg.example:5000", "a/b", "t", None),
    ("[::1]:5000/a:t", "[::1]:5000", "a", "t", None),
    ("a@sha256:" + "0" * 64, None, "a", None, "sha256:" + "0" * 64),
    ("a:" + "t" * 128, None, "a", "t" * 128, None),  # a tag at its longest
])
def test_an_image_reference_is_parsed_into_its_parts(ref, registry, path, tag, digest):
    parsed = parse_image_ref(ref)
    assert (parsed.registry, parsed.path, parsed.tag, parsed.digest) == (registry, path, tag, digest)
    assert str(parsed) == ref


@pytest.mark.parametrize("ref, says", [
    ("ubuntu", "has no tag"),  # :latest changes under you
    ("a:" + "t" * 129, "is not valid"),  # one past the longest tag
    ("Ubuntu:22.04", "is not valid"),  # upper case in the repository
    ("a:b c", "is not valid"),
    ("a:1; rm -rf /", "is not valid"),
    ("a@sha256:" + "0" * 63, "is not valid"),
    ("", "is not valid"),
    ("x" * 250 + ":12345", "is not valid"),  # longer than 255 characters
])
def test_a_reference_that_is_not_one_or_has_no_tag_is_refused(ref, says):
    with pytest.raises(RenderError, match=says):
        parse_image_ref(ref)


def test_a_mirror_stands_in_for_docker_hub_alone_and_none_leaves_the_reference():
    m = "mirror.example:5000/hub"
    assert mirror_image("ubuntu:22.04", None) == "ubuntu:22.04"
    assert mirror_image("index.docker.io/nvidia/cuda:12.4.1-base-ubuntu22.04", m) == f"{m}/nvidia/cuda:12.4.1-base-ubuntu22.04"
    assert mirror_image("registry-1.docker.io/library/ubuntu:22.04", m) == f"{m}/library/ubuntu:22.04"
    assert mirror_image("ghcr.io/org/img:1", m) == "ghcr.io/org/img:1"
    with pytest.raises(RenderError):
        mirror_image("ubuntu", m)  # the reference is checked even with a mirror
