"""The ``[[recipe]]`` rows of a matrix file: how NVIDIA's base images are rebuilt from their recipe.

Every value reaches a RUN line or an ENV/LABEL of a Dockerfile, so each one must match its pattern
whole (:data:`RECIPE_PATTERNS`: no shell text, no spaces where a word is expected).
"""

from __future__ import annotations

import re
from typing import Any, Callable

from envman.config import Invalid, check_url
from envman.matrix.model import PLATFORMS, STATUSES, BaseRecipe, Download
from envman.matrix.row import each_row, to_str

_URL_PATH = r"(?:/[A-Za-z0-9._~%+-]+)*/?"
RECIPE_PATTERNS: dict[str, tuple[str, str]] = {
    "tag": (r"[0-9]{1,2}\.[0-9]{1,2}(?:\.[0-9]{1,3})?-[a-z0-9.-]{1,64}", "an nvidia/cuda tag like '10.0-base-ubuntu18.04'"),
    "from": (r"[a-z0-9]+(?:[._/-][a-z0-9]+)*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", "an image reference like 'ubuntu:18.04'"),
    "url": (rf"https?://[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*(?::[0-9]{{1,5}})?{_URL_PATH}", "an http(s) URL of letters, digits and . _ ~ % + - /"),
    "package": (r"[a-z0-9][a-z0-9+.-]{0,127}(?:=[A-Za-z0-9][A-Za-z0-9.+~:-]{0,127})?", "a Debian package, 'name' or 'name=version'"),
    "fingerprint": (r"[0-9A-F]{40}", "a 40-digit upper-case hex OpenPGP fingerprint"),
    "sha256": (r"[0-9a-f]{64}", "a sha256 in 64 lower-case hex digits"),
    "deb": (r"[A-Za-z0-9][A-Za-z0-9._+~-]{0,200}\.deb", "a .deb file name"),
    "env_key": (r"[A-Za-z_][A-Za-z0-9_]{0,127}", "an environment variable name"),
    "label_key": (r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", "a label name"),
    "path": (r"/?[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*", "a path of letters, digits and . _ - /"),
    "abs_path": (r"/[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*", "an absolute path of letters, digits and . _ - /"),
    "commit": (r"[0-9a-f]{40}", "a 40-digit git commit"),
    "text": (r"[ -~]{1,300}", "one line of printable ASCII"),
    "env_text": (r"[ -~]{1,4000}", "one line of printable ASCII"),
}
_RECIPE_RES = {k: re.compile(p) for k, (p, _) in RECIPE_PATTERNS.items()}
#: The only variables an ENV value of a recipe may refer to (the parent image's values).
ENV_REFERENCES = ("PATH", "LD_LIBRARY_PATH")


def _shaped(kind: str) -> Callable[[Any], str]:
    def conv(v: Any) -> str:
        text = to_str(v)
        if not _RECIPE_RES[kind].fullmatch(text):
            raise ValueError(text)
        if kind == "url":
            _check_recipe_url(text)
        return text
    return conv


def _check_recipe_url(url: str) -> None:
    """A recipe's URL follows the index URLs' rules (:func:`envman.config.check_url`): it is written
    into the base image's Dockerfile, so nothing in it may look like a token (``ghp_...`` as a path
    segment). Plain ``http://`` is accepted: apt checks signatures, and downloads and keys their
    sha256 and fingerprint."""

    try:
        check_url(url, what="recipe URL", plain_http=True)
    except Invalid as exc:
        raise ValueError(exc.what) from None


def _env_value(v: Any) -> str:
    text = to_str(v)
    if not _RECIPE_RES["env_text"].fullmatch(text) and text != "":
        raise ValueError(text)
    rest = re.sub(r"\$\{(" + "|".join(ENV_REFERENCES) + r")\}", "", text)
    if "$" in rest or "\\" in rest:
        raise ValueError(text)
    return text


def _pairs(first: str, second: Callable[[Any], str]) -> Callable[[Any], tuple[str, str]]:
    def conv(v: Any) -> tuple[str, str]:
        if not isinstance(v, list) or len(v) != 2:
            raise ValueError(v)
        return _shaped(first)(v[0]), second(v[1])
    return conv


def _download(v: Any) -> Download:
    if not isinstance(v, dict) or set(v) != {"url", "sha256"}:
        raise ValueError(v)
    d = Download(url=_shaped("url")(v["url"]), sha256=_shaped("sha256")(v["sha256"]))
    _shaped("deb")(d.file)
    return d


def parse_recipes(doc: dict[str, Any], file: str) -> list[BaseRecipe]:
    out = []
    for r in each_row(doc, "recipe", file):
        def word(key: str, kind: str, **kw: Any) -> Any:
            return r.get(key, _shaped(kind), RECIPE_PATTERNS[kind][1], **kw)

        def many(key: str, kind: str) -> tuple[str, ...]:
            return r.list(key, _shaped(kind), RECIPE_PATTERNS[kind][1])

        tag = word("tag", "tag")
        parent = word("parent", "tag", default=None)
        from_image = word("from", "from", default=None)
        if (parent is None) == (from_image is None):
            raise r.fail("from", "exactly one of 'from' (the plain OS image) and 'parent' (a tag)")
        recipe = BaseRecipe(
            tag=tag,
            platform=r.str("platform", choices=PLATFORMS),
            parent=parent,
            from_image=from_image,
            path=word("path", "path"),
            commit=word("commit", "commit"),
            repositories=many("repositories", "url"),
            setup_packages=many("setup_packages", "package"),
            key_url=word("key_url", "url", default=None),
            key_fingerprint=word("key_fingerprint", "fingerprint", default=None),
            replaced_key=word("replaced_key", "url", default=None),
            env=r.list("env", _pairs("env_key", _env_value), "[NAME, value] pairs (values: printable ASCII, "
                       "no $ but ${PATH} or ${LD_LIBRARY_PATH})"),
            labels=r.list("labels", _pairs("label_key", _shaped("text")), "[name, value] pairs"),
            packages=many("packages", "package"),
            downloads=r.list("downloads", _download, "{ url = URL of a .deb, sha256 = 64 hex digits } tables"),
            hold=many("hold", "package"),
            symlinks=r.list("symlinks", _pairs("path", _shaped("abs_path")), "[target, absolute link path] pairs"),
            ld_so_conf=many("ld_so_conf", "abs_path"),
            omitted=many("omitted", "text"),
            os_archive=word("os_archive", "url", default=None),
            os_archive_status=r.str("os_archive_status", default="confirmed", choices=STATUSES),
            **r.provenance(),
        )
        if from_image is not None and (not recipe.repositories or recipe.key_url is None or recipe.key_fingerprint is None):
            raise r.fail("repositories", "the apt repositories, key_url and key_fingerprint of a recipe that starts "
                          "from the plain OS image")
        out.append(recipe)
    return out
