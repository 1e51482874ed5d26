"""Security by rule: requirements: pip's decoding.

Each table is the list the code uses (imported, not copied), so an entry dropped from the code fails here."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from envman.errors import UserError
from envman.project.file import load_project

from tests.support.security_rules import REQ_PIECES, pip_reads_a_redirect


_CODECS = ("utf-7", "UTF-7", "unicode_escape", "raw_unicode_escape", "latin-1", "iso-8859-15", "cp1252", "utf-8", "UTF8",
           "utf_8", "ascii", "us-ascii", "utf-16", "utf-8-sig", "rot13", "idna", "punycode", "hex", "no-such-codec")


#: The first two lines, where pip looks for an encoding declaration (on a line starting with #).
_HEAD_LINES = st.one_of(
    st.builds(lambda form, c: form.format(c), st.sampled_from(["# -*- coding: {} -*-", "#coding={}", "# vim: set fileencoding={} :",
                                                               "#!/bin/sh coding:{}", " # coding: {}", "rich  # coding: {}"]),
              st.sampled_from(_CODECS)),
    st.sampled_from(["", "rich", "# a comment", "torch==2.4.0 \\"]))


#: Bodies that say one thing as UTF-8 and another in a declared encoding (UTF-7, escapes).
_ENCODED_PIECES = st.sampled_from([
    "+AC0-i https+ADo-//evil.example/simple", "\\x0a--trusted-host evil.example", "\\n-r /etc/passwd", "rich\\x0a-r x",
    "+ACQAew-PIP_INDEX_URL+AH0-", "\\u002di http://x", "\ufeff-rfile.txt", "+AAo--extra-index-url=http://x", "-e.",
    "-e./pkg", "\u00c5-i http://x", "caf\u00e9==1.0", "\x85-rfile", "\u2028-i http://x",
])


_BOMS = st.sampled_from([b"", b"\xef\xbb\xbf", b"\xef\xbb\xbf\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\xff\xfe\x00\x00"])


def _pip_decodes(data: bytes) -> str:
    """The text pip makes of a requirements file's bytes (pip's own ``auto_decode``), in a stack
    image's locale (``LANG=C.UTF-8``)."""
    from unittest import mock

    from pip._internal.utils import encoding

    with mock.patch.object(encoding.locale, "getpreferredencoding", lambda *_: "UTF-8"):
        return encoding.auto_decode(data)


def _envman_reads(data: bytes) -> str | None:
    """The requirements text envman accepts from a file of these bytes (what it writes into the
    build), or ``None`` when it refuses the file."""
    import tempfile

    from envman.project.file import load_project

    with tempfile.TemporaryDirectory() as d:
        Path(d, "req.txt").write_bytes(data)
        Path(d, "envman.toml").write_text('name = "p"\nrequirements = "req.txt"\n')
        try:
            return load_project(d).requirements
        except UserError:
            return None


def _assert_pip_reads_what_envman_checked(written: str) -> None:
    data = written.encode("utf-8")  # how envman writes the build's requirements.txt
    try:
        pip_text = _pip_decodes(data)
    except (UnicodeError, LookupError) as exc:
        raise AssertionError(f"envman accepted {written!r}, which pip cannot decode ({exc})") from None
    assert pip_text == written, (written, pip_text)
    assert not pip_reads_a_redirect(pip_text), written


@given(_BOMS, st.lists(_HEAD_LINES, max_size=2), st.lists(st.one_of(REQ_PIECES, _ENCODED_PIECES), max_size=8).map("".join))
@settings(max_examples=1500, deadline=None)
def test_pip_reads_every_accepted_requirements_file_as_the_text_envman_checked(bom, head, body):
    """The rule, checked with pip's own decoding: whatever bytes a requirements file holds (a
    byte-order mark, a coding line in any encoding, escapes that a codec turns into options), the
    file envman writes into the build is decoded by pip to exactly the text envman checked, and
    that text redirects nothing."""
    written = _envman_reads(bom + "\n".join([*head, body]).encode("utf-8"))
    if written is not None:
        _assert_pip_reads_what_envman_checked(written)


@given(st.lists(st.one_of(_HEAD_LINES, REQ_PIECES, _ENCODED_PIECES), min_size=1, max_size=6))
@settings(max_examples=800, deadline=None)
def test_a_list_of_requirements_is_written_as_plain_utf8_that_pip_reads_as_checked(items):
    """A list in envman.toml is written one item a line, as UTF-8 without comment items (so never
    with a coding line), and pip reads that file as the text checked."""
    from envman.project.file import parse_project

    try:
        project = parse_project({"requirements": items}, Path("/p/envman.toml"))
    except UserError:
        return
    assert not any(line.lstrip().startswith("#") for line in project.requirements.encode().split(b"\n")[:2]
                   for line in [line.decode()])
    _assert_pip_reads_what_envman_checked(project.requirements)


@pytest.mark.parametrize("data", [
    b"# -*- coding: utf-7 -*-\n+AC0-i https+ADo-//evil.example/simple\n",
    b"# coding: unicode_escape\nrich\\x0a--trusted-host evil.example\n",
    b"rich\n# coding: raw_unicode_escape\nx\\u000a-r /etc/passwd\n",
    b"#coding=utf-7\n+ACQAew-PIP_INDEX_URL+AH0-\n",
    b"\xef\xbb\xbf\xef\xbb\xbf-rfile.txt\n",
    b"\xef\xbb\xbf# coding: utf-7\n+AC0-i https+ADo-//evil.example/simple\n",
    b"# coding: latin-1\nrich\n",
    b"# coding: no-such-codec\nrich\n",
])
def test_a_file_pip_would_decode_otherwise_is_refused_in_one_line(data, tmp_path):
    (tmp_path / "req.txt").write_bytes(data)
    (tmp_path / "envman.toml").write_text('name = "p"\nrequirements = "req.txt"\n')
    with pytest.raises(UserError) as e:
        load_project(tmp_path)
    assert "\n" not in str(e.value) and "requirements" in e.value.where
    assert "coding line" in e.value.what or "byte-order mark" in e.value.what


@pytest.mark.parametrize("data", [b"# -*- coding: utf-8 -*-\nrich\n", b"#coding:ascii\nrich\n", b"\xef\xbb\xbfrich==13.7.1\n",
                                  b"rich\ncaf\xc3\xa9-pkg==1\n", b"rich\ntorch\n# coding: utf-7\n"])
def test_a_file_pip_reads_as_utf8_is_accepted(data, tmp_path):
    (tmp_path / "req.txt").write_bytes(data)
    (tmp_path / "envman.toml").write_text('name = "p"\nrequirements = "req.txt"\n')
    assert "rich" in load_project(tmp_path).requirements
