"""This machine's apt sources (envman/images/aptsources.py): one-line and deb822 files read as the
host's apt reads them, and the archive a base is debootstrapped from taken only when its URI is
safe on an argv."""

from __future__ import annotations

import pytest

from envman.images.aptsources import AptSource, archive_mirror, host_apt_sources, parse_deb822, parse_one_line


def test_one_line_sources_drop_comments_options_and_deb_src():
    text = ("# a comment\n"
            "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://deb.example/debian bookworm main contrib\n"
            "deb-src http://deb.example/debian bookworm main\n"
            "deb http://deb.example/debian bookworm-updates main # trailing\n"
            "deb http://short.example\n")  # too few fields
    assert parse_one_line(text) == [
        AptSource("http://deb.example/debian", ("bookworm",), ("main", "contrib")),
        AptSource("http://deb.example/debian", ("bookworm-updates",), ("main",)),
    ]


def test_deb822_paragraphs_with_continuations_disabled_and_source_only_ones():
    text = ("Types: deb deb-src\nURIs: http://a.example/ubuntu\n  http://b.example/ubuntu\n"
            "Suites: noble noble-updates\nComponents: main universe\n\n"
            "# off\nTypes: deb\nURIs: http://c.example/ubuntu\nSuites: noble\nComponents: main\nEnabled: no\n\n"
            "Types: deb-src\nURIs: http://d.example/ubuntu\nSuites: noble\nComponents: main\n")
    assert parse_deb822(text) == [
        AptSource("http://a.example/ubuntu", ("noble", "noble-updates"), ("main", "universe")),
        AptSource("http://b.example/ubuntu", ("noble", "noble-updates"), ("main", "universe")),
    ]


def test_the_archive_serves_the_plain_release_with_main():
    sources = [AptSource("http://sec.example/debian-security", ("bookworm-security",), ("main",)),
               AptSource("http://x.example/contrib", ("bookworm",), ("contrib",)),
               AptSource("http://deb.example/debian/", ("bookworm",), ("main",))]
    assert archive_mirror(sources) == "http://deb.example/debian"
    assert archive_mirror(sources, "bookworm") == "http://deb.example/debian"
    assert archive_mirror(sources, "trixie") is None


@pytest.mark.parametrize("uri", ["http://x.example/a b", "http://x.example/$(id)", "ftp://x.example/debian",
                                 "http://x.example/a;b", "-oAPT::x=1", "http://x.example/`id`"])
def test_a_uri_that_is_not_safe_on_an_argv_is_never_the_archive(uri):
    assert archive_mirror([AptSource(uri, ("bookworm",), ("main",))]) is None


def test_the_hosts_files_are_read_from_a_list_a_folder_and_skipped_when_unreadable(tmp_path):
    lst = tmp_path / "sources.list"
    lst.write_text("deb http://a.example/debian bookworm main\n")
    d = tmp_path / "sources.list.d"
    d.mkdir()
    (d / "b.sources").write_text("Types: deb\nURIs: http://b.example/debian\nSuites: bookworm\nComponents: main\n")
    (d / "ignored.txt").write_text("deb http://c.example/debian bookworm main\n")
    (d / "broken.list").write_bytes(b"deb http://d.example/\xff bookworm main\n")  # not UTF-8: replaced, kept
    (d / "unreadable.list").mkdir()  # a folder named like a list
    got = host_apt_sources((lst, d, tmp_path / "missing"))
    assert [s.uri for s in got] == ["http://a.example/debian", "http://b.example/debian", "http://d.example/\ufffd"]
    assert archive_mirror(got) == "http://a.example/debian"
