"""What envman prints from files and state goes through ``envman.errors.printable``: by rule, every
code point that is not plain visible text comes out as a visible ASCII escape, and visible text
of any script comes out unchanged."""

from __future__ import annotations

import sys
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from envman.errors import printable

#: Categories that draw nothing or act on the terminal: controls, format (zero-width, bidi, tag
#: characters), surrogates, private use, unassigned, line/paragraph separators, spaces.
HIDDEN = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs")


def test_every_hidden_code_point_is_escaped():
    # the first three planes and the tag/variation plane whole, every 97th code point elsewhere
    points = [*range(0x30000), *range(0xE0000, 0xE1000), *range(0x30000, sys.maxunicode + 1, 97)]
    hidden = [c for c in map(chr, points) if unicodedata.category(c) in HIDDEN and c != " "]
    assert len(hidden) > 60_000
    for c in hidden:
        out = printable(f"a{c}b")
        assert c not in out and out.isascii() and out.isprintable() and out.startswith("a\\") and out.endswith("b"), \
            hex(ord(c))


def test_letters_that_draw_nothing_are_escaped():
    for c in "\u115f\u1160\u3164\uffa0":
        assert printable(c) == f"\\u{ord(c):04x}"


@given(st.text(st.characters(blacklist_categories=HIDDEN)))
@settings(max_examples=300, deadline=None)
def test_visible_text_is_unchanged(text):
    if not any(c in "\u115f\u1160\u3164\uffa0" for c in text):
        assert printable(text) == text


@given(st.text())
@settings(max_examples=300, deadline=None)
def test_the_output_shows_every_escape_it_made(text):
    out = printable(text)
    assert out.isprintable()
    assert printable(out) == out  # escaping again changes nothing: the escapes are plain text
