"""Security by rule: dry-run lines in any locale.

Each table is the list the code uses (imported, not copied), so an entry dropped from the code fails here."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings, strategies as st

from envman.errors import printable

from tests.support.security_rules import is_refused


#: Words a dry-run line may have to carry: controls, bidi overrides, zero-width and other format
#: characters, emoji, quotes and backslashes, and bytes that were not UTF-8 (kept by surrogateescape).
_ARGV_WORDS = st.lists(st.text(st.one_of(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
    st.sampled_from(["\u202e", "\u200b", "\x1b", "\n", "\r", "\x85", "\u2028", "'", "\\", "$", "`", "\udcff", "\udc80",
                     "\ufeff", "\U000e0063", "a", "é"])), max_size=12), min_size=1, max_size=8)


@pytest.mark.parametrize("locale_name", ["C", "C.UTF-8"])
@given(argv=_ARGV_WORDS)
@settings(max_examples=60, deadline=None)
def test_a_pasted_dry_run_line_runs_the_same_argv_in_bash_under_any_locale(locale_name, argv):
    """The rule, checked with bash itself: the line envman prints, pasted into bash under
    LC_ALL=C or a UTF-8 locale, passes exactly the argv's bytes, and shows only printable text."""
    import subprocess

    from envman.errors import shell_join

    line = shell_join(argv)
    assert printable(line) == line
    got = subprocess.run(["bash", "-c", "printf '%s\\0' " + line], capture_output=True,
                         env={"LC_ALL": locale_name, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}, timeout=20)
    assert got.returncode == 0, got.stderr
    assert got.stdout == b"".join(os.fsencode(w) + b"\0" for w in argv), line


def _pip_short_options() -> list[str]:
    from pip._internal.req.req_file import build_parser

    return sorted({o for opt in build_parser().option_list for o in opt._short_opts})


@given(st.sampled_from(_pip_short_options()), st.sampled_from(["", " ", "\t", "  "]),
       st.sampled_from([".", "./pkg", "..", "/abs", "git+https://x/y#egg=y", "file.txt", "x", ".[extra]", "~/p"]),
       st.sampled_from(["", "rich==13.7.1 ", "rich \\\n"]))
@settings(max_examples=300, deadline=None)
def test_every_short_pip_option_with_its_value_attached_or_apart_is_refused(short, gap, value, before):
    """``-e.``, ``-e./pkg``, ``-rfile.txt``: every short option pip's requirements parser knows
    (read from pip itself), its value attached or apart, alone on a line or after a requirement."""
    assert is_refused(f"{before}{short}{gap}{value}"), f"{before}{short}{gap}{value}"
