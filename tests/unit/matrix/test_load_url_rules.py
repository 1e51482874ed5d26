"""Every URL of every matrix (a base recipe's apt repositories, key, downloads and archive; a
framework row's indexes) follows the index URLs' rules: nothing token-like in it, no
user:token@, no query; and no refusal echoes the token (envman.matrix.load, envman.config)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envman.errors import EnvmanError
from envman.matrix.load import load_matrix
from envman.matrix.validate import validate
from envman.stack.resolve import resolve

DATA = Path(__file__).resolve().parents[2] / "data"
TOKENS = ("ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "glpat-" + "xY9zW8vU7tS6rQ5pO4nM",
          "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345")
RECIPE_URLS = ('repositories = ["https://developer.download.nvidia.com/compute/cuda/repos/ubuntu1804/x86_64"]',
               'key_url = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu1804/x86_64/3bf863cc.pub"')


def _mini(tmp_path: Path, recipes: str | None = None, rest: str | None = None) -> list[Path]:
    files = []
    for f in sorted(DATA.glob("mini*.toml")):
        text = f.read_text()
        text = recipes if recipes is not None and f.name == "mini-recipes.toml" else text
        text = rest if rest is not None and f.name == "mini-rest.toml" else text
        (tmp_path / f.name).write_text(text)
        files.append(tmp_path / f.name)
    return files


@pytest.mark.parametrize("token", TOKENS)
@pytest.mark.parametrize("line", RECIPE_URLS)
@pytest.mark.parametrize("where", ["a path segment", "a host label"])
def test_a_token_anywhere_in_a_recipe_url_is_refused_and_never_echoed(tmp_path, token, line, where):
    original = (DATA / "mini-recipes.toml").read_text()
    assert line in original
    url = re.search(r'"(https://[^"]+)"', line).group(1)
    hostile = url.replace("/compute/", f"/{token}/compute/") if where == "a path segment" else \
        url.replace("https://", f"https://{token.lower().replace('_', '-')}.")
    with pytest.raises(EnvmanError) as e:
        load_matrix(_mini(tmp_path, recipes=original.replace(url, hostile, 1)), shipped=False)
    assert token not in str(e.value) and token.lower() not in str(e.value).lower()
    assert "\n" not in str(e.value) and "mini-recipes.toml" in e.value.where


def test_the_recipe_urls_as_shipped_are_accepted():
    load_matrix()  # NVIDIA's repositories, keys, .deb downloads and old-releases over plain http


@pytest.mark.parametrize("token", TOKENS)
@pytest.mark.parametrize("key", ["index_url", "find_links"])
def test_a_token_in_a_framework_row_s_url_is_a_validation_problem_that_hides_it(tmp_path, token, key):
    rest = (DATA / "mini-rest.toml").read_text()
    row = 'packages = ["torch==2.4.1+cpu"]\n'
    assert row in rest
    hostile = rest.replace(row, row + f'{key} = "https://download.example/{token}/whl"\n', 1)
    problems = validate(load_matrix(_mini(tmp_path, rest=hostile), shipped=False))
    found = [p for p in problems if "token" in str(p)]
    assert found and not any(token in str(p) for p in problems)


# --------------------------------------------------------------------------- sources: citations go into the image


def _user_row(tmp_path: Path, source: str, key: str = "source") -> Path:
    """A user matrix file that shadows the shipped torch 2.4.1 CPU row, with ``source`` as its
    row's ``key`` list (``source``: a row's citations)."""
    import json

    from envman.paths import matrices_dir

    lines = (matrices_dir() / "torch.toml").read_text().splitlines()
    start = next(i for i, ln in enumerate(lines)
                 if ln == "[[build]]" and lines[i + 1] == 'version = "2.4.1"' and lines[i + 2] == 'variant = "cpu"')
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("[[") or lines[i].startswith("[build."))
    value = json.dumps(source) if key.endswith("note") else f"[{json.dumps(source)}]"
    row = [ln for ln in lines[start:end] if not ln.startswith(f"{key} = ")] + [f"{key} = {value}"]
    path = tmp_path / "mine.toml"
    path.write_text("\n".join([*lines[:3], "", *row]) + "\n")
    return path


def _secret(url: str) -> str:
    return next(s for s in ("glpat-Ab3dEf6hIj9kLm2nOp5q", "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
                            "QwErTyUiOpAsDfGhJkLzXcVbNmQwErTyUi", "123e4567-e89b-12d3-a456-426614174000",
                            "s3cr3tV4lu3") if s in url)


HOSTILE_SOURCES = [
    "https://gitlab.example/api/v4/projects/1/repository/files/x?private_token=glpat-Ab3dEf6hIj9kLm2nOp5q",
    "https://gitlab.example/glpat-Ab3dEf6hIj9kLm2nOp5q/notes",
    "https://user:ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8@github.com/org/wheels",
    # variants: any query, a bare user:password@, a fragment, another scheme, a token in prose
    "https://docs.example/page?key=s3cr3tV4lu3",
    "https://bob:s3cr3tV4lu3@docs.example/page",
    "https://docs.example/page#access_token=ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "git+ssh://bob:s3cr3tV4lu3@git.example/x.git",
    "release notes (https://docs.example/x/%68f_QwErTyUiOpAsDfGhJkLzXcVbNmQwErTyUi/notes)",
    "the page at docs.example/x/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, read on 2026-11-28",
    "NVIDIA's table, key 123e4567-e89b-12d3-a456-426614174000",
]


@pytest.mark.parametrize("key", ["source", "platform_source", "wheel_python_source", "cuda_libs_source", "note",
                                 "platform_note"])
@pytest.mark.parametrize("url", HOSTILE_SOURCES)
def test_a_token_in_a_user_matrix_row_s_source_url_never_reaches_the_image(tmp_path, url, key):
    """Attack ("all URLs from any matrix follow the index-URL rules"): recipe URLs and a row's
    ``index_url``/``find_links`` were checked with ``check_url``, but a row's ``source`` lists
    were not: a user's matrix row (one that shadows a shipped row) whose ``source`` cites a URL
    with a token (``?private_token=glpat-...``, a ``glpat-`` path segment, ``user:ghp_...@``)
    loaded, validated and rendered, and the URL was written into ``envman/stack.json`` in the
    image and into the Dockerfile's ``envman.stack`` label, from where ``envman push`` sends it
    to a registry (a row's notes go there too). Now refused when the file is read, in one line
    that never shows the secret."""
    with pytest.raises(EnvmanError) as e:
        load_matrix([_user_row(tmp_path, url, key)])
    assert e.value.where == str(tmp_path / "mine.toml") and f".{key}:" in e.value.what
    assert _secret(url) not in str(e.value) and "\n" not in e.value.what


@pytest.mark.parametrize("source", [
    "https://pytorch.org/get-started/previous-versions/",
    "https://github.com/pytorch/pytorch/blob/v2.4.1/RELEASE.md#release-compatibility-matrix",
    "https://files.pythonhosted.org/packages/6f/8a/0e6f8f3f5d3e4b0c1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f/"
    "torch-2.4.1-cp311-cp311-manylinux1_x86_64.whl#sha256=" + "ab" * 32,
    "http://download.pytorch.org/whl/cu92/torch-0.4.1-cp36-cp36m-linux_x86_64.whl",  # a citation may be http
    "NVIDIA's doc/unsupported-tags.md (mirror @ 181367a6) lists this tag",
    "commit 0123456789abcdef0123456789abcdef01234567 of the wheel's repository",
    "https://github.com/org/hf_transfer/releases (hf_transfer-0.1.8-cp38-abi3-manylinux_2_17_x86_64.whl)",
    "see https://gist.github.com/someone/6c1017e087f45a330b25922a69e12eec.",  # a sentence's stop after a hex id
])
def test_a_source_without_a_secret_is_taken_as_written(tmp_path, source):
    m = load_matrix([_user_row(tmp_path, source)])
    assert source in resolve(m, "torch-2.4-cpu").sources


def test_every_shipped_source_and_note_is_taken():
    from envman.matrix.row import citation_problem

    m = load_matrix()
    texts = [t for b in m.builds for t in (*b.source, *b.platform_source, b.note, b.platform_note)]
    assert len(texts) > 100 and all(citation_problem(t) is None for t in texts)


@pytest.mark.parametrize("key", ["note", "platform_note"])
def test_a_note_without_a_secret_is_taken(tmp_path, key):
    note = "built from https://docs.example/notes#section-2, as NVIDIA's table says (hf_transfer is not used)"
    m = load_matrix([_user_row(tmp_path, note, key)])
    build = next(b for b in m.builds if b.framework == "torch" and str(b.version) == "2.4.1" and b.variant == "cpu")
    assert getattr(build, key) == note


@pytest.mark.parametrize("url, cited", [
    ("https://user:ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8@idx.example/simple/torch/",
     "https://idx.example/simple/torch/"),
    ("https://idx.example/p/torch-2.4.1-cp311-none-linux_x86_64.whl?X-Amz-Signature=ab12&X-Amz-Date=1#sha256=" + "a" * 64,
     "https://idx.example/p/torch-2.4.1-cp311-none-linux_x86_64.whl#sha256=" + "a" * 64),
    ("https://tok@idx.example?x", "https://idx.example"),
    ("https://idx.example/simple/torch/", "https://idx.example/simple/torch/"),
    ("not a url ?x", "not a url ?x"),
])
def test_what_matrix_update_cites_carries_no_credentials_or_query(url, cited):
    """``matrix update`` writes the index pages and wheel URLs it read into the rows it makes;
    an index given with ``user:token@`` or a signed download URL must not put its secret there
    (the row would then be refused when read, and before that rule, copied into images)."""
    from envman.config import citable_url
    from envman.matrix.backfill import with_citations
    from envman.matrix.newrow import RowBuilder
    from envman.matrix.row import citation_problem

    assert citable_url(url) == cited
    assert "://" not in url or citation_problem(citable_url(url)) is None
    assert with_citations([], [url, cited], "how") == [f"{cited} (how)"]
    from packaging.version import Version

    row = RowBuilder("torch", Version("2.4.1"), "cpu")
    row.fact("python", ["3.11"], url, "how")
    assert row.sources == [cited] and cited in row.derived["python"]
