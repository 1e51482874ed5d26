"""A project's requirements as pip reads them: its lines (continuations, comments), what each may
say (a package, pinned or by URL, and only the pip options that choose among the packages of
envman's index), and the requirements file a project file names, read safely. ``envman.toml``'s
parser (:mod:`envman.project.file`), ``envman project init`` and ``envman project detect`` use it."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
import codecs
import urllib.parse

from envman.errors import UserError, clip
from envman.errors import clip

#: The only pip options a project's requirements may carry (exact spellings): they choose among
#: the packages of envman's configured index and never point pip anywhere else. pip also reads
#: ``-r``/``-c`` (other files), ``-e`` (an editable checkout), ``-i``/``--index-url``,
#: ``--extra-index-url``, ``--no-index``, ``-f``/``--find-links``, ``--trusted-host`` (no TLS
#: check) and more, each with short forms (``-rfile``) and any unambiguous abbreviation
#: (``--requirem=``, ``--constr``, ``--ind``): all of them are refused by this rule, whatever the
#: spelling, as is a direct reference to a local path or a ``file:`` URL (``pkg @ file:///x``)
#: and pip's ``${VAR}`` expansion (it would read the build's environment).
REQUIREMENT_OPTIONS = ("--hash", "--pre", "--prefer-binary", "--only-binary", "--no-binary", "--require-hashes")
#: Of those, the ones that may take their value as the next word (``--hash sha256:...``).
_OPTIONS_WITH_VALUE = ("--hash", "--only-binary", "--no-binary")
#: How a local path starts (a ``file:`` URL is refused wherever it appears in a word).
LOCAL_PREFIXES = ("./", "../", "/", "~", ".\\")
#: Words that are a local path by themselves.
LOCAL_NAMES = (".", "..")
#: pip's comment rule (``#`` at the start of a line or after whitespace).
_COMMENT_RE = r"(^|\s+)#.*$"
#: The same rule as a search from the ``#`` itself (a look-behind, not ``\s+``): pip's pattern
#: tried at each blank of a long run of blanks costs time quadratic in the line; the blanks it
#: would also drop are stripped after.
_COMMENT_AT_RE = re.compile(r"(?:^|(?<=\s))#.*$")


def requirement_lines(text: str) -> list[str]:
    """The logical lines of a requirements file as pip reads them (pip's ``req_file``:
    ``join_lines`` then ``ignore_comments``): a line ending in ``\\`` is joined to the next with
    its backslashes dropped and nothing put in their place (``fi\\`` + ``le:`` is ``file:``), unless
    the line is a comment; then a ``#`` at the start or after whitespace starts a comment, and blank
    lines are dropped."""
    logical: list[str] = []
    pending: list[str] = []
    for line in text.splitlines():
        comment = re.match(_COMMENT_RE, line) is not None
        if line.endswith("\\") and not comment:
            pending.append(line.strip("\\"))
            continue
        logical.append("".join(pending) + (" " + line if comment else line))
        pending = []
    if pending:
        logical.append("".join(pending))
    return [s for s in (_COMMENT_AT_RE.sub("", line, count=1).strip() for line in logical) if s]


#: The suffixes pip takes for an archive (pip's ``ARCHIVE_EXTENSIONS``): a requirement that ends
#: in one is a local file to pip, whether or not it exists.
ARCHIVE_SUFFIXES = (".zip", ".whl", ".tar.bz2", ".tbz", ".tar.gz", ".tgz", ".tar", ".tar.xz", ".txz", ".tlz",
                    ".tar.lz", ".tar.lzma")
#: A word that starts like a URL: a scheme and ``:``. pip takes ``git+git:host/x`` or
#: ``http:host/x`` for a link (its ``is_url`` needs no ``//``).
_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def _pip_reads_a_path(requirement: str) -> bool:
    """Whether pip reads the requirement part of a line (before its options) as a local path, as
    its ``parse_req_from_line`` does, whatever is on disk where the build runs: not a URL, and,
    before any ``;`` marker and ``[extras]``, a path separator (``/`` or ``\\``) or a leading
    ``.`` (a folder, if one is there), or an archive suffix (a file), where the part before an
    ``@`` (if any) looks like a path too."""
    if _SCHEME_RE.match(requirement.strip()):
        return False  # a link to pip (its is_url): the URL rules decide
    name = requirement.split(";", 1)[0].strip()
    bare = re.sub(r"\[[^\]]*\]$", "", name).rstrip("/\\")
    before_at = name.split("@", 1)[0]

    def looks_like_path(text: str) -> bool:
        return "/" in text or "\\" in text or text.startswith(".")

    if "@" not in name:
        return looks_like_path(name) or bare.lower().endswith(ARCHIVE_SUFFIXES)
    return looks_like_path(before_at)


def _scheme_without_slashes(word: str) -> str | None:
    """The scheme of a word (alone or after ``name@``) that pip would take for a link although no
    ``//`` follows it (``git+git:host/x``: git reads that as ``host:path`` over SSH), else ``None``."""
    before, at, after = word.partition("@")
    target = after if at and "://" not in before else word
    m = _SCHEME_RE.match(target)
    return m.group(0) if m and not target[m.end():].startswith("//") else None


def _local_target(word: str) -> bool:
    """Whether ``word`` names a local path or a ``file:`` URL, alone or after ``name@``."""
    low = word.lower()
    before, at, after = low.partition("@")
    target = after if at and "://" not in before else low
    return target.startswith(LOCAL_PREFIXES) or target in LOCAL_NAMES or "file:" in low


def requirement_url(word: str) -> tuple[str, str] | None:
    """``(text before the URL, URL)`` of a requirement word that holds one (``pkg@https://...``,
    ``git+https://...``), else ``None``."""
    before, at, after = word.partition("@")
    prefix, url = (before + at, after) if at and "://" not in before else ("", word)
    return (prefix, url) if "://" in url else None


def _url_problem(url: str) -> str | None:
    """Why a URL in a requirement may not go into the image build, or ``None``: the index URLs'
    rules (https, plain http only to this machine, no credentials and nothing that looks like a
    token anywhere in it: the requirements file is written into the image)."""
    from envman.config import is_loopback_host, secret_in_url

    scheme, _, rest = url.partition("://")
    vcs, plus, transport = scheme.lower().partition("+")
    transport = transport if plus else vcs
    if transport not in ("https", "http"):
        return f"a {scheme}:// URL cannot be fetched in the image build (https only)"
    authority = re.sub(r"[/?#][\s\S]*", "", rest)  # up to the path, the query or the fragment
    if "@" in authority:
        return ("a URL with credentials (user:token@) would be written into the image: give the package's index "
                "as [network] pip_index (its credentials go into a build secret)")
    try:
        host = urllib.parse.urlsplit(f"{transport}://{authority}").hostname or ""
    except ValueError:
        return "the URL's host cannot be read"
    if transport == "http" and not is_loopback_host(host):
        return "a plain http:// URL would fetch code unencrypted (https only, or http to this machine)"
    secret = secret_in_url(url)
    if secret == "token":
        return "a part of the URL looks like a token, which would be written into the image"
    if secret == "query":
        return "a URL with a query string (often a token) would be written into the image"
    return None


def shown_requirement(line: str) -> str:
    """``line`` as a message may show it: every URL in it through :func:`envman.config.shown_url`."""
    from envman.config import shown_url

    out = []
    for word in line.split(" "):
        found = requirement_url(word)
        # only where something was hidden (a URL is otherwise shown as written, clipped later)
        if found is not None and (shown := shown_url(found[1])) != found[1][:200]:
            word = found[0] + shown
        out.append(word)
    return " ".join(out)


def requirement_problem(line: str) -> str | None:
    """Why one logical requirements line may not go into an image build, or ``None``.

    The line is read the way pip reads it: the words (split on spaces) before the first one that
    starts with ``-`` are the requirement; the rest is the options part, which pip splits with
    shell quoting (``"--index-url=..."`` and ``\\--index-url`` are options to pip). Every option
    must be one of :data:`REQUIREMENT_OPTIONS`, spelt in full; every other word of the options
    part must be the value of the option before it."""
    if "${" in line:
        return "pip would expand ${...} from the build's environment"
    tokens = line.split(" ")
    first = next((i for i, t in enumerate(tokens) if t.startswith("-")), len(tokens))
    for word in " ".join(tokens[:first]).split():
        if word.startswith("-"):
            return "an option inside the requirement (after a tab) is not accepted: put options after a space"
        if _local_target(word):
            return "a local path or file: URL is not available inside the image build"
        if (scheme := _scheme_without_slashes(word)) is not None:
            return (f"pip reads {clip(scheme, 40)!r}... as a link although no // follows: "
                    "write pkg @ https://HOST/PATH")
        found = requirement_url(word)
        why = _url_problem(found[1]) if found is not None else None
        if why:
            return why
    if _pip_reads_a_path(" ".join(tokens[:first])):
        return ("pip reads this as a local path (a / or \\, a leading . or an archive name), which is not "
                "available inside the image build: name the package, or pkg @ https://...")
    try:
        words = iter(shlex.split(" ".join(tokens[first:])))
    except ValueError:
        return "the options part has an unclosed quote or a trailing backslash"
    for word in words:
        if not word.startswith("-"):
            return (f"{word!r} follows the options, where pip ignores it or reads it as an option's value: "
                    "put the requirement first, then its options")
        name, eq, _ = word.partition("=")
        if name not in REQUIREMENT_OPTIONS:
            return (f"the pip option {name} is not accepted (only {', '.join(REQUIREMENT_OPTIONS)}, spelt in full: "
                    "nothing may point pip at another index, file or folder)")
        if not eq and name in _OPTIONS_WITH_VALUE:
            value = next(words, None)
            if value is None:
                return f"the pip option {name} needs a value"
            if _local_target(value):
                return "a local path or file: URL is not available inside the image build"
    return None


#: pip's encoding declaration (pip's ``auto_decode``): searched on a line that starts with ``#``,
#: among the first two lines of the file's bytes split at ``\n``; the first one found wins.
_PIP_CODING_RE = rb"coding[:=]\s*([-\w.]+)"
#: The encodings pip may read envman's requirements file in: the file is written as UTF-8.
_UTF8_CODECS = ("utf-8", "ascii")


def decoding_problem(text: str) -> str | None:
    """Why pip, reading ``text`` as envman writes it (UTF-8 bytes, no byte-order mark), would not
    read exactly ``text``, or ``None``.

    pip decodes a requirements file by its byte-order mark, else by a ``coding:`` declaration on
    a ``#`` line among its first two lines (``# -*- coding: utf-7 -*-`` turns ``+AC0-i`` into
    ``-i``), else by the locale (UTF-8: every stack image sets ``LANG=C.UTF-8``). So a text that
    starts with a byte-order mark (pip drops it: ``\ufeff-rfile`` is ``-rfile`` to pip) or
    declares any encoding but UTF-8 or ASCII is refused, whatever the rest of it says."""

    if text.startswith("\ufeff"):
        return "it starts with a byte-order mark, which pip drops before reading the first line"
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return "it holds a lone surrogate, which UTF-8 cannot carry"
    for line in data.split(b"\n")[:2]:
        found = re.search(_PIP_CODING_RE, line) if line[:1] == b"#" else None
        if found is None:
            continue
        name = found.group(1).decode("ascii")
        try:
            codec = codecs.lookup(name).name
        except LookupError:
            codec = ""
        if codec not in _UTF8_CODECS:
            return (f"a coding line among the first two declares {clip(name, 40)!r}: pip would decode the file "
                    "with it, not as the UTF-8 envman checked")
        if codec == "ascii" and not text.isascii():
            return "a coding line declares ASCII, but the text is not ASCII"
        return None
    return None


def check_requirements(text: str, *, where: str) -> None:
    """Requirements go into the image build as one file: pip must read it as the text checked
    (:func:`decoding_problem`), and no line may point pip anywhere but the configured index
    (:data:`REQUIREMENT_OPTIONS`, :func:`requirement_problem`)."""
    why = decoding_problem(text)
    if why:
        raise UserError(f"the requirements are refused: {why}", where=where,
                        fix="save them as plain UTF-8 with no byte-order mark and no coding line (or one "
                            "declaring utf-8)")
    for s in requirement_lines(text):
        why = requirement_problem(s)
        if why:
            raise UserError(f"{clip(shown_requirement(s), 120)!r}: {why}", where=where,
                            fix="list package names (pkg==1.2, pkg @ https://...) only; the index is envman's "
                                "(config [network] pip_index); install local code at run time from /workspace")


def read_requirements(root: Path, rel: str, *, where: str) -> str:
    """The text of a requirements file named in a project file: a regular UTF-8 file of at most
    1 MiB whose real path lies inside the project root (no absolute path, ``..`` or symlink
    leading out, never a FIFO or a device)."""
    from envman.safefile import read_text

    bad = UserError(f"key requirements: {rel!r} must be a file inside the project", where=where,
                    fix="give a path relative to the project root, or a list of requirements")
    if not rel or "\0" in rel or os.path.isabs(rel) or rel.startswith("~") or len(rel) > 4096:
        raise bad
    try:
        return read_text(root / rel, what="requirements file", inside=root,
                         fix="give a regular UTF-8 file inside the project, or a list of requirements")
    except FileNotFoundError:
        raise UserError(f"key requirements: file {rel!r} not found under {root}", where=where,
                        fix="give a path relative to the project root, or a list of requirements") from None
