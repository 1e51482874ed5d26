"""Security by rule: requirements options.

Each table is the list the code uses (imported, not copied), so an entry dropped from the code fails here."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from tests.support.security_rules import is_refused


#: pip's requirements-file options that point it elsewhere (pip's req_file.SUPPORTED_OPTIONS and
#: per-requirement options), long forms; every unambiguous abbreviation pip accepts is tried.
PIP_REDIRECTS = ("--index-url", "--extra-index-url", "--no-index", "--constraint", "--requirement", "--editable",
                 "--find-links", "--trusted-host", "--use-feature", "--config-settings", "--global-option",
                 "--install-option")


PIP_SHORT = ("-i", "-r", "-c", "-e", "-f")


@pytest.mark.parametrize("option", PIP_REDIRECTS)
def test_every_spelling_of_a_redirecting_option_is_refused(option):
    for n in range(4, len(option) + 1):
        spelled = option[:n]
        for line in (f"{spelled}=x", f"{spelled} x", f"rich==13.7.1 {spelled}=x", f"rich \\\n{spelled}=x",
                     f"rich==13.7.1 --hash=sha256:{'a' * 64} {spelled} x"):
            assert is_refused(line), line


@pytest.mark.parametrize("short", PIP_SHORT)
def test_every_short_form_is_refused(short):
    for line in (f"{short} x", f"{short}x", f"{short}file.txt", f"  {short}git+https://x/y#egg=y", f"pkg {short} x"):
        assert is_refused(line), line


@pytest.mark.parametrize("line", ["pkg @ file:///etc/passwd", "pkg@file:/x", "file:///x.whl", "./local", "../up",
                                  "/abs/path", "~/x", ".", "pkg @ ./x", "pkg ${HOME}", "pkg==1 ; x ${SECRET}"])
def test_local_references_and_expansion_are_refused(line):
    assert is_refused(line)


NAMES = st.from_regex(r"[A-Za-z][A-Za-z0-9._-]{0,20}", fullmatch=True)


VERSIONS = st.from_regex(r"(==|>=|<=|~=|!=)[0-9]{1,3}(\.[0-9]{1,3}){0,2}", fullmatch=True)


@given(NAMES, st.one_of(st.just(""), VERSIONS), st.sampled_from(["", " --hash=sha256:" + "b" * 64, "  # a comment",
                                                                 " ; python_version >= '3.9'"]))
@settings(max_examples=200, deadline=None)
def test_ordinary_requirements_pass(name, version, tail):
    assert not is_refused(f"{name}{version}{tail}\n{name} @ https://files.example/{name}-1.0-py3-none-any.whl\n")


@given(st.from_regex(r"--?[A-Za-z][A-Za-z-]{0,20}", fullmatch=True))
@settings(max_examples=300, deadline=None)
def test_any_option_but_the_listed_ones_is_refused(option):
    from envman.project.requirements import REQUIREMENT_OPTIONS

    assert is_refused(f"rich {option}=x") == (option not in REQUIREMENT_OPTIONS)
