"""URLs in requirements are held to the index URLs' rules, since the requirements file is written
into the project image: https (plain http only to this machine), no credentials, nothing that
looks like a token in the host, path or query; a refusal never shows the token."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envman.errors import UserError
from envman.project.requirements import check_requirements, requirement_problem

TOKENS = ["ghp_abcdefghijklmnopqrstuvwxyz0123456789", "glpat-xxxxxxxxxxxxxxxxxxxx", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123",
          "sk-proj-9fQ2xL7mN4pR8tV1wZ3yB6cD"]
#: Each way a requirement line carries a URL, with {url} where it goes.
FORMS = ["pkg @ {url}/p-1.0-py3-none-any.whl", "pkg@{url}/p.whl", "git+{url}/grp/lib.git#egg=lib",
         "pkg[extra] @ {url}/p.whl ; python_version >= '3.8'", "{url}/p-1.0.tar.gz"]


def _form(form: str, url: str) -> str:
    if form.startswith("git+") and url.startswith("http"):
        return form.replace("git+{url}", "git+" + url)
    return form.replace("{url}", url)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("token", TOKENS)
@pytest.mark.parametrize("where", ["userinfo", "user only", "path", "host", "query"])
def test_a_token_anywhere_in_a_requirement_url_is_refused_unseen(form, token, where):
    url = {"userinfo": f"https://oauth2:{token}@git.example", "user only": f"https://{token}@git.example",
           "path": f"https://git.example/{token}", "host": f"https://{token}.git.example",
           "query": "https://git.example"}[where]
    line = _form(form, url)
    if where == "query":
        line = line.replace(".whl", f".whl?token={token}").replace(".git#", f".git?t={token}#").replace(
            ".tar.gz", f".tar.gz?t={token}")
    with pytest.raises(UserError) as e:
        check_requirements(line + "\n", where="f")
    assert token not in e.value.line(), e.value.line()


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("scheme", ["http://evil.example", "ftp://x.example", "git+ssh://git@github.com",
                                    "svn://x.example", "http://10.1.2.3:8080", "http://[::ffff:10.1.2.3]"])
def test_only_https_or_http_to_this_machine(form, scheme):
    line = form.replace("git+{url}", scheme if scheme.startswith("git+") else "git+" + scheme).replace("{url}", scheme)
    assert requirement_problem(line) is not None, line


@pytest.mark.parametrize("line", [
    "pkg @ https://files.example/pkg-1.0-py3-none-any.whl",
    "torch @ https://download.pytorch.org/whl/cu121/torch-2.4.1%2Bcu121-cp311-cp311-linux_x86_64.whl#sha256=" + "a" * 64,
    "x @ https://files.pythonhosted.org/packages/4c/8f/2a1b9d7e6f5a4c3b2a1908f7e6d5c4b3a2910abc/x-1.0-py3-none-any.whl",
    "git+https://github.com/huggingface/transformers.git@4c8f2a1b9d7e6f5a4c3b2a1908f7e6d5c4b3a291#egg=transformers",
    "git+https://github.com/org/repo.git@v1.2.3#egg=repo",
    "pkg @ http://127.0.0.1:8000/pkg-1.0-py3-none-any.whl", "pkg @ http://localhost/p.whl", "pkg @ http://[::1]:9/p.whl",
])
def test_ordinary_urls_pass(line):
    assert requirement_problem(line) is None


@given(st.sampled_from(TOKENS), st.sampled_from(FORMS), st.text(alphabet="abcdefghij/.-_", max_size=20))
@settings(max_examples=200, deadline=None)
def test_no_refusal_shows_a_token_whatever_surrounds_it(token, form, path):
    line = _form(form, f"https://u:{token}@h.example/{path}")
    with pytest.raises(UserError) as e:
        check_requirements(line + "\n", where="f")
    assert token not in e.value.line()
