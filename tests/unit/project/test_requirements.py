"""envman.project.file: requirements read exactly as pip reads them (pip's own ``req_file`` is the
oracle), every local reference in every form, and every refusal of a requirements path exactly."""

from __future__ import annotations

import os

import pytest
from hypothesis import example, given, settings, strategies as st

from envman.errors import UserError
from envman.project import requirements as F
from envman.project.requirements import (
    LOCAL_NAMES, LOCAL_PREFIXES, REQUIREMENT_OPTIONS, _OPTIONS_WITH_VALUE, check_requirements, requirement_lines,
    requirement_problem,
)
from tests.support.errors import refusal

# --------------------------------------------------------------------------- requirements as pip reads them

pip_req_file = pytest.importorskip("pip._internal.req.req_file")

REQ_TEXT = st.text(alphabet=st.sampled_from("abX#\\ \t\n\r-="), max_size=40)


@settings(max_examples=400, deadline=None)
@given(REQ_TEXT)
@example("pkg==1.0 @ fi\\\nle:///etc/passwd\n")
@example("a \\\n# c \\\nb\n#x\\\nc\\")
@example("\\\\a\\\\\nb")
def test_logical_lines_are_pip_s_own(text):
    """pip joins a line ending in a backslash to the next with no space (so ``fi\\`` + ``le:``
    is ``file:``), then drops comments and blank lines: the check sees what pip will read."""
    lines = pip_req_file.join_lines(enumerate(text.splitlines(), start=1))
    assert requirement_lines(text) == [line for _, line in pip_req_file.ignore_comments(lines)]


#: Options that point pip elsewhere (pip's req_file SUPPORTED_OPTIONS beyond the allowed ones).
REDIRECTS = ("--index-url", "--extra-index-url", "--no-index", "--constraint", "--requirement", "--editable",
             "--find-links", "--trusted-host", "-i", "-r", "-c", "-e", "-f")


@pytest.mark.parametrize("option", REDIRECTS)
@pytest.mark.parametrize("form", ['--pre "{o}=x"', "--pre '{o}' x", 'pkg --hash=sha256:a "{o}" x', "-\\\n{o_tail} x",
                                  "pkg \\\n{o}=x", "--prefer-binary\\\n {o}=x"])
def test_a_redirecting_option_is_refused_quoted_or_split_over_lines(option, form):
    text = form.format(o=option, o_tail=option[1:]) + "\n"
    with pytest.raises(UserError, match="is not accepted"):
        check_requirements(text, where="W")


LOCAL_FORMS = ["{p}x", "pkg@{p}x", "pkg @ {p}x", "pkg[extra] @ {p}x", "pkg @ \\\n{p}x", "pkg@{p}x://y", "pkg==1 --hash {p}x", "pkg@{p}x@y"]


# (in the options part pip removes a backslash like a shell: ".\\x" is ".x" there)
@pytest.mark.parametrize("prefix,form", [(p, f) for p in LOCAL_PREFIXES + ("file:", "FILE:") for f in LOCAL_FORMS
                                         if not ("\\" in p and "--hash" in f)])
def test_every_local_reference_is_refused(prefix, form):
    text = form.format(p=prefix)
    assert requirement_problem(" ".join(requirement_lines(text))) == \
        "a local path or file: URL is not available inside the image build"


@pytest.mark.parametrize("name", LOCAL_NAMES)
@pytest.mark.parametrize("form", ["{n}", "pkg@{n}", "pkg @ {n}"])
def test_a_bare_dot_or_dot_dot_is_refused(name, form):
    assert requirement_problem(form.format(n=name)) is not None


@pytest.mark.parametrize("text", ["fi\\\nle:///etc/passwd", "pkg @ fi\\\nle:///x", "pkg==$\\\n{HOME}", "pkg==${HOME}",
                                  "$\\\n{PIP_INDEX_URL}"])
def test_a_line_continuation_cannot_hide_a_file_url_or_an_expansion(text):
    with pytest.raises(UserError):
        check_requirements(text + "\n", where="W")


URL_PATH = st.text(alphabet=st.sampled_from("abz019./@~:-_"), max_size=20)


@settings(max_examples=200, deadline=None)
@given(URL_PATH)
@example("./x")
@example("/abs")
def test_the_at_of_a_url_s_user_part_is_not_a_direct_reference(path):
    """``https://user@host/...`` keeps its ``@``: only ``name @ URL`` is a direct reference, so
    the line is refused for its credentials (written into the image), never read as a local path."""
    for line in (f"pkg @ https://tok@host/{path}", f"https://tok@{path}"):
        why = requirement_problem(line)
        assert why is not None and "credentials" in why, (line, why)


@pytest.mark.parametrize("option", REQUIREMENT_OPTIONS)
@given(value=st.text(alphabet=st.sampled_from("abc019:=-,"), min_size=1, max_size=12))
@settings(max_examples=30, deadline=None)
def test_an_allowed_option_is_accepted_whatever_its_value(option, value):
    assert requirement_problem(f"pkg==1 {option}={value}") is None


@pytest.mark.parametrize("option", REQUIREMENT_OPTIONS)
def test_a_value_follows_only_the_options_that_take_one(option):
    takes = option in _OPTIONS_WITH_VALUE
    assert requirement_problem(f"pkg==1 {option} v") == (None if takes else (
        "'v' follows the options, where pip ignores it or reads it as an option's value: put the requirement first, "
        "then its options"))
    assert requirement_problem(f"pkg==1 {option}") == (f"the pip option {option} needs a value" if takes else None)
    assert requirement_problem(f"pkg==1 {option} v w") is not None  # one value only
    if takes:
        assert requirement_problem(f"pkg==1 {option} ./x") == \
            "a local path or file: URL is not available inside the image build"
        assert requirement_problem(f"pkg==1 {option} v --pre") is None


def test_a_refused_requirement_is_one_exact_line_quoting_at_most_120_characters():
    line = "pkg @ file:///" + "x" * 200
    assert refusal(lambda: check_requirements(f"ok==1\n{line}\n", where="W: requirements")) == (
        repr(line[:120] + "… (94 more characters)") + ": a local path or file: URL is not available inside the image build",
        "W: requirements",
        "list package names (pkg==1.2, pkg @ https://...) only; the index is envman's (config [network] pip_index); "
        "install local code at run time from /workspace")
    assert refusal(lambda: check_requirements("pkg==${X}\n", where="W"))[0] == \
        "'pkg==${X}': pip would expand ${...} from the build's environment"
    assert refusal(lambda: check_requirements("--no-index\n", where="W"))[0] == (
        "'--no-index': the pip option --no-index is not accepted (only --hash, --pre, --prefer-binary, --only-binary, "
        "--no-binary, --require-hashes, spelt in full: nothing may point pip at another index, file or folder)")
    assert refusal(lambda: check_requirements("pkg --hash 'x\n", where="W"))[0] == \
        "\"pkg --hash 'x\": the options part has an unclosed quote or a trailing backslash"
    assert refusal(lambda: check_requirements("pkg\t--hash=x\n", where="W"))[0] == \
        "'pkg\\t--hash=x': an option inside the requirement (after a tab) is not accepted: put options after a space"


# --------------------------------------------------------------------------- the requirements file a project names

REQ_FIX = "give a path relative to the project root, or a list of requirements"


@pytest.mark.parametrize("rel", ["", "/etc/passwd", "~/req.txt", "~req.txt", "a\0b", "r" * 4097])
def test_a_requirements_path_that_is_not_inside_the_project_by_its_text_is_refused(tmp_path, rel):
    assert refusal(lambda: F.read_requirements(tmp_path, rel, where="W")) == (
        f"key requirements: {rel!r} must be a file inside the project", "W", REQ_FIX)


def test_the_4096_character_limit_is_inclusive(tmp_path):
    what = refusal(lambda: F.read_requirements(tmp_path, "r" * 4096, where="W"))[0]
    assert "must be a file inside the project" not in what  # passed the rule; the file system answers


def test_a_missing_requirements_file_and_one_that_is_not_a_regular_file(tmp_path):
    assert refusal(lambda: F.read_requirements(tmp_path, "nope.txt", where="W")) == (
        f"key requirements: file 'nope.txt' not found under {tmp_path}", "W", REQ_FIX)
    os.mkfifo(tmp_path / "fifo.txt")
    assert refusal(lambda: F.read_requirements(tmp_path, "fifo.txt", where="W")) == (
        "is a FIFO (named pipe), expected a regular requirements file", str(tmp_path / "fifo.txt"),
        "give a regular UTF-8 file inside the project, or a list of requirements")


# ------------------------------------------------- each requirement URL's verdict, exactly (mutation)

_SCHEME = "cannot be fetched in the image build (https only)"
_PLAIN = "a plain http:// URL would fetch code unencrypted (https only, or http to this machine)"
_CREDS = ("a URL with credentials (user:token@) would be written into the image: give the package's index "
          "as [network] pip_index (its credentials go into a build secret)")
_TOKEN = "a part of the URL looks like a token, which would be written into the image"
_QUERY = "a URL with a query string (often a token) would be written into the image"
URL_VERDICTS = [
    ("https://files.example/p-1.0-py3-none-any.whl", None),
    ("HTTPS://files.example/p.whl", None),
    ("http://127.0.0.1:8080/p.whl", None),
    ("http://[::1]/p.whl", None),
    ("git+https://github.com/org/lib.git", None),
    ("git+http://127.0.0.1/org/lib.git", None),
    ("GIT+HTTPS://github.com/org/lib.git", None),
    ("https://files.example/p.whl#sha256=0123456789abcdef", None),
    ("https://files.example/0123456789abcdef0123456789abcdef01234567/p.whl", None),
    ("git+https://github.com/org/lib.git@0123456789abcdef0123456789abcdef01234567", None),
    ("https://files.example/aB3kF9xQ2mZ7pL4wR8tYq.whl", None),  # an archive name is not a token
    ("ftp://files.example/p.whl", f"a ftp:// URL {_SCHEME}"),
    ("file:///tmp/p.whl", f"a file:// URL {_SCHEME}"),
    ("git+ssh://git@github.com/org/lib.git", f"a git+ssh:// URL {_SCHEME}"),
    ("git+file:///srv/lib.git", f"a git+file:// URL {_SCHEME}"),
    ("git://github.com/org/lib.git", f"a git:// URL {_SCHEME}"),
    ("http+https://x.example/p.whl", None),  # the transport after '+' decides
    ("https+http://x.example/p.whl", _PLAIN),
    ("http://pypi.example/p.whl", _PLAIN),
    ("git+http://example.com/lib.git", _PLAIN),
    ("http://10.0.0.5/p.whl", _PLAIN),
    ("https://user:tok@files.example/p.whl", _CREDS),
    ("git+https://tok@github.com/org/lib.git", _CREDS),
    ("https://files.example/p.whl?token=1", _QUERY),
    ("https://files.example?x=1", _QUERY),
    ("https://files.example/p.whl?next=https://other.example", _QUERY),
    ("https://files.example/ghp_abcdefghijklmnopqrstuvwxyz0123456789/p.whl", _TOKEN),
    ("https://ghp_abcdefghijklmnopqrstuvwxyz0123456789.files.example/p.whl", _TOKEN),
    ("https://files.example/a/aB3kF9xQ2mZ7pL4wR8tYqN/p.whl", _TOKEN),
    ("https://files.example/pkg@aB3kF9xQ2mZ7pL4wR8tYqN", _TOKEN),
    ("https://files.example#aB3kF9xQ2mZ7pL4wR8tYqN@x", _TOKEN),  # a fragment goes into the image too
    ("https://[::1/p.whl", "the URL's host cannot be read"),
    ("https://files.example/p.whl?key=ghp_abcdefghijklmnopqrstuvwxyz0123456789", _QUERY),  # a query is not the path
    ("https://files.example?a?b#c#d", _QUERY),
    ("https://files.example/a?b/aB3kF9xQ2mZ7pL4wR8tYqN", _QUERY),
    ("https://files.example/p.whl#a#aB3kF9xQ2mZ7pL4wR8tYqN", _TOKEN),
    ("https://files.example#ghp_abcdefghijklmnopqrstuvwxyz0123456789", _TOKEN),
    ("https://files.example/p.whl#egg=pkg&subdirectory=sub/dir", None),  # pip's own fragment fields
    ("https://tok@files.example?x", _CREDS),
    ("https://files.example?u@v", _QUERY),  # an @ after the authority is not a credential
    ("https://files.example/p@aB3kF9xQ2mZ7pL4wR8tYqN?x", _TOKEN),
    ("https:///p.whl", None),  # no host: nothing to leak (pip refuses it itself)
    ("https://0123456789abcdef0123.files.example/p.whl", None),  # each host label judged alone: a hex one is plain
    ("https://0123456789abcdef0123.aB3kF9xQ2mZ7pL4wR8tYqN.example/p.whl", _TOKEN),
]


@pytest.mark.parametrize("url, verdict", URL_VERDICTS, ids=[f"u{i}" for i in range(len(URL_VERDICTS))])
def test_each_requirement_url_gets_exactly_its_verdict(url, verdict):
    from envman.project.requirements import _url_problem

    assert _url_problem(url) == verdict


SHOWN = [
    ("numpy==1.26.4", "numpy==1.26.4"),
    ("pkg@https://user:tok@files.example/p.whl", "pkg@https://***@files.example/p.whl"),
    ("pkg @ https://user:tok@files.example/p.whl", "pkg @ https://***@files.example/p.whl"),
    ("https://tok@files.example/p.whl", "https://***@files.example/p.whl"),
    ("git+https://github.com/org/lib.git", "git+https://github.com/org/lib.git"),
    ("a b https://u:p@x.example/p c", "a b https://***@x.example/p c"),
    ("pkg@https://files.example/ghp_abcdefghijklmnopqrstuvwxyz0123456789/p.whl",
     "pkg@https://files.example/***/p.whl"),
    ("pkg@https://files.example/p.whl?token=abc", "pkg@https://files.example/p.whl?…"),
    ("x@y", "x@y"),
    ("pkg@https://files.example/" + "a" * 300, "pkg@https://files.example/" + "a" * 300),  # clipped later, whole here
    ("  two  spaces ", "  two  spaces "),
]


@pytest.mark.parametrize("line, shown", SHOWN, ids=[f"s{i}" for i in range(len(SHOWN))])
def test_a_requirement_is_shown_with_every_url_secret_hidden_and_nothing_else_changed(line, shown):
    from envman.project.requirements import shown_requirement

    assert shown_requirement(line) == shown


# --------------------------------------------------------------------------- what pip reads as a path or a link


def _pip_link(line: str, cwd) -> str | None:
    """The link pip's own constructor makes of one requirement (``None``: a name from an index)."""
    from pip._internal.req.constructors import install_req_from_line

    old = os.getcwd()
    os.chdir(cwd)
    try:
        link = install_req_from_line(line).link
    except Exception:  # pip refuses it: nothing is fetched
        return None
    finally:
        os.chdir(old)
    return None if link is None else link.url


def _pip_cwd(tmp_path):
    """A build's working directory holding installable folders and archives of every name used."""
    for d in ("src", "sub/dir", "vendor/pkg", "pkg", "a"):
        os.makedirs(tmp_path / d, exist_ok=True)
        (tmp_path / d / "setup.py").write_text("")
    return tmp_path


@pytest.mark.parametrize("line", ["src/", "sub/dir", "sub/pkg-1.0.tar.gz", "pkg-1.0.tar.gz", "pkg-1.0-py3-none-any.whl",
                                  "rich==13.7.1\nvendor/pkg",
                                  # variants: extras, markers, case, other archive kinds, a path before @
                                  ".[dev]", "sub/dir ; python_version > '3'", "pkg-1.0.TAR.GZ", "x.tgz",
                                  "x.tar", "x.tar.xz", "x.tbz", "x.zip", "pkg/", "a\\b", "sub/pkg @ https://h.example/x.whl",
                                  "pkg-1.0.tar.gz; python_version > '3'", "x.whl[extra]"])
def test_every_line_pip_reads_as_a_local_path_is_refused(tmp_path, line):
    """Attack (pip reading a requirement differently from envman): the local-path rule (local
    paths, ``file:`` URLs are refused) knew paths by their start (``./``, ``../``, ``/``, ``~``)
    only. pip also takes a word with a ``/`` in it that names a folder, and any word that ends
    like an archive (``.tar.gz``, ``.zip``, ``.whl``), as a local path (pip's
    ``_get_url_from_path``: a ``file://`` link), whether or not it exists. So ``src/``,
    ``sub/dir`` or ``pkg-1.0.tar.gz`` passed envman and made pip install from whatever that path
    is in the build's working directory. Checked here with pip's own constructor."""
    cwd = _pip_cwd(tmp_path)
    (cwd / "x.whl").write_text("")
    link = _pip_link(line.splitlines()[-1], cwd)
    assert link is None or link.startswith("file:"), "pip reads it as a local path (or refuses it)"
    with pytest.raises(UserError):
        check_requirements(line + "\n", where="requirements.txt")


@pytest.mark.parametrize("line", ["git+git:evil.example/x.git#egg=pkg", "git+http:evil.example/x.git#egg=pkg",
                                  "git+ssh:evil/x#egg=pkg", "bzr+lp:foo#egg=pkg",
                                  # variants: plain schemes, upper case, one slash, after name@, hg and svn
                                  "https:evil.example/x.tar.gz", "HTTP:evil.example/x.whl", "GIT+GIT:evil/x#egg=p",
                                  "git+https:/evil.example/x.git#egg=p", "hg+ssh:evil/x#egg=p", "svn+svn:evil/x#egg=p",
                                  "pkg@git+git:evil/x", "pkg @ https:evil.example/x.whl", "ftp:evil.example/x.whl"])
def test_every_line_pip_reads_as_a_vcs_link_is_checked_as_a_url(line):
    """Attack ("URLs with @ and #egg="): envman found a requirement's URL by ``://``, but pip's
    ``is_url`` needs only ``<scheme>:`` with a VCS scheme, so ``git+git:evil.example/x.git#egg=pkg``
    is a git link to pip, which runs ``git clone git:evil.example/x.git``: scp-like syntax, an SSH
    connection to the host ``git`` (resolved through the build's DNS search domains), not the
    https-only fetch the rule promises. No URL rule looked at it."""
    assert requirement_problem(line) is not None
    with pytest.raises(UserError):
        check_requirements(line + "\n", where="requirements.txt")


@pytest.mark.parametrize("line", ["torch", "torch==2.4.1", "src[x]", "pkg[a,b]>=1.0; python_version < '3.9'", "tar", "whl",
                                  "pkg @ https://h.example/pkg-1.0.tar.gz", "git+https://h.example/org/x.git@v1#egg=x",
                                  "pkg @ git+https://h.example/x.git", "zope.interface>=5", "backports.zoneinfo",
                                  "pkg; sys_platform == 'linux'", "numpy --hash=sha256:" + "a" * 64])
def test_names_and_https_links_are_still_taken(tmp_path, line):
    assert requirement_problem(line) is None
    link = _pip_link(line, _pip_cwd(tmp_path))
    assert link is None or link.startswith("https://") or link.startswith("git+https://")


NAMEISH = st.text(alphabet=st.sampled_from("ab.-_/\\:@[]+;=<> gitzpwhl"), min_size=1, max_size=16)


@given(NAMEISH)
@settings(max_examples=400, deadline=None)
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pip parses odd version strings
@example("src/")
@example("a.whl")
@example("git+git:a")
@example(".")
def test_what_envman_takes_pip_never_reads_as_a_path_or_a_link_without_https(tmp_path_factory, line):
    """pip's own constructor is the oracle: a line envman accepts is a name from the index, or a
    link to an https URL; never a ``file:`` link, whatever the build's working directory holds."""
    if requirement_problem(line) is not None:
        return
    link = _pip_link(line, _pip_cwd(tmp_path_factory.mktemp("cwd")))
    assert link is None or link.split("+", 1)[-1].startswith("https://"), (line, link)
