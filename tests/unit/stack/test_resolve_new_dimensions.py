"""Free-threaded Pythons (``…-py3.14t``) and Ubuntu 26.04: a row claims them, names ask for them,
the render installs them; ``matrix validate`` holds the claims to their rules."""

from __future__ import annotations

from dataclasses import replace

import pytest
from packaging.version import Version

from envman.errors import MatrixError, ResolveError
from envman.matrix.load import load_files, load_matrix
from envman.matrix.validate import validate
from envman.stack.names import Stack, parse_name
from envman.stack.resolve import resolve

V = Version


@pytest.fixture(scope="module")
def shipped():
    return load_matrix()


# --- the name grammar ---------------------------------------------------------------------------


@pytest.mark.parametrize("name, py", [("torch-2.12-py3.14t", "3.14t"), ("torch-2.12-cuda13.0-py3.13t-arm64", "3.13t"),
                                      ("torch-2.12-py3.14", "3.14"), ("tf-2.15-cpu-py3.11t-runtime", "3.11t")])
def test_a_name_may_ask_for_a_free_threaded_python(name, py):
    assert parse_name(name).python == py


@pytest.mark.parametrize("name", ["torch-2.12-py3.14tt", "torch-2.12-pyt3.14", "torch-2.12-py3t", "torch-2.12-t"])
def test_the_t_belongs_after_a_python_version_only(name):
    with pytest.raises(ResolveError):
        parse_name(name)


# --- resolution and the stack -------------------------------------------------------------------


@pytest.mark.parametrize("query, py", [("torch-2.12.0-py3.13t", "3.13"), ("torch-2.12-py3.14t", "3.14"),
                                       ("torch-2.15-py3.15t", "3.15"), ("torch-2.15-cuda13.2-py3.14t-arm64", "3.14")])
def test_a_free_threaded_stack_names_itself_and_installs_a_standalone_python(shipped, query, py):
    s = resolve(shipped, query)
    assert (s.python, s.freethreaded, s.python_strategy, s.interpreter) == (py, True, "standalone", py + "t")
    assert s.name.endswith(f"-py{py}t" + ("-arm64" if query.endswith("-arm64") else ""))
    assert resolve(shipped, s.name) == s  # the canonical name resolves to itself
    assert Stack.from_json(s.to_json()) == s


def test_a_free_threaded_python_is_standalone_even_where_the_distro_installs_that_python(shipped):
    """On an OS whose distro packages Python 3.14 the GIL stack takes the distro's python3.14; no
    distribution packages the free-threaded 3.14t, so that stack installs a standalone one, and
    says so beside the GIL stack's notes."""
    ubuntu = next(o for o in shipped.oses if o.name == "ubuntu24.04")
    distro = replace(ubuntu, python_apt=tuple(sorted({*ubuntu.python_apt, V("3.14")})))
    m = replace(shipped, oses=tuple(distro if o is ubuntu else o for o in shipped.oses))
    gil, free = resolve(m, "torch-2.15.0-cuda13.2-py3.14"), resolve(m, "torch-2.15.0-cuda13.2-py3.14t")
    assert gil.base_image.endswith("-ubuntu24.04") and free.base_image == gil.base_image
    assert (gil.python_strategy, gil.freethreaded, gil.name) == ("apt", False, "torch-2.15.0-cuda13.2-py3.14")
    assert (free.python_strategy, free.freethreaded, free.name) == ("standalone", True, "torch-2.15.0-cuda13.2-py3.14t")
    assert free.notes == gil.notes + (
        "free-threaded CPython 3.14t (PEP 703), python-build-standalone installed by uv; the row lists its wheels "
        "for it (python_freethreaded)",)


def test_a_gil_stack_keeps_its_json(shipped):
    s = resolve(shipped, "torch-2.12-py3.14")
    assert not s.freethreaded and "freethreaded" not in s.to_json() and s.interpreter == "3.14"


@pytest.mark.parametrize("query, words", [
    ("torch-2.13-py3.13t", "torch-2.13.0-cuda13.0 has no free-threaded Python 3.13t wheels (it has 3.14t)"),
    ("torch-2.8-py3.13t", "has no free-threaded Python 3.13t wheels"),
])
def test_a_free_threaded_python_the_row_does_not_claim_is_one_clear_error(shipped, query, words):
    with pytest.raises(ResolveError) as exc:
        resolve(shipped, query)
    assert words in exc.value.line() and "\n" not in exc.value.line()


def test_the_render_installs_the_free_threaded_interpreter_with_uv(shipped):
    from envman.render.dockerfile import render_stack

    text = render_stack(resolve(shipped, "torch-2.12-py3.14t"), probe=b"# probe\n").files["Dockerfile"].decode()
    assert "uv python install --no-bin 3.14t;" in text
    assert "uv python find --managed-python 3.14t)" in text


def test_every_shipped_free_threaded_claim_is_a_python_of_the_row(shipped):
    rows = [b for b in shipped.builds if b.python_freethreaded]
    assert {str(b.version) for b in rows} >= {"2.12.0", "2.15.0"}
    for b in rows:
        assert set(b.python_freethreaded) <= set(b.python) and min(b.python_freethreaded) >= V("3.13")
        for p in b.python_freethreaded:
            assert resolve(shipped, f"{b.name}-py{p}t").freethreaded


# --- matrix validate and the loader -------------------------------------------------------------


@pytest.mark.parametrize("claim, what", [
    ((V("3.99"),), "claims free-threaded Python 3.99t but not Python 3.99 (python)"),
    ((V("3.12"),), "claims free-threaded Python 3.12t, but CPython has free-threaded builds from 3.13 on"),
])
def test_each_free_threaded_rule_reports_exactly_its_problem(mini, claim, what):
    b = next(b for b in mini.builds if b.name == "torch-2.4.1-cuda12.4")
    b2 = replace(b, python=tuple(sorted({*b.python, V("3.12")})), python_freethreaded=claim)
    problems = validate(replace(mini, builds=tuple(b2 if x is b else x for x in mini.builds)))
    assert [(p.where, p.what) for p in problems] == [("torch 2.4.1 cu124", what)]


def test_a_malformed_free_threaded_list_is_rejected_naming_the_key(tmp_path):
    p = tmp_path / "f.toml"
    p.write_text('schema = 1\nkind = "framework"\nframework = "torch"\n[[build]]\nversion = "9.0"\nvariant = "cpu"\n'
                 'python = ["3.14"]\npython_freethreaded = ["3.14t"]\npackages = ["torch==9.0"]\nsource = ["s"]\nstatus = "confirmed"\n')
    with pytest.raises(MatrixError) as exc:
        load_files([p])
    assert "build[0].python_freethreaded" in str(exc.value)


# --- Ubuntu 26.04 -------------------------------------------------------------------------------


def test_ubuntu_26_04_images_of_13_3_1_on_both_platforms(shipped):
    imgs = [i for i in shipped.images if i.os == "ubuntu26.04" and str(i.cuda_patch) == "13.3.1"]
    assert {i.flavour for i in imgs} == {"base", "runtime", "devel", "cudnn-runtime", "cudnn-devel"}
    assert all(i.platforms == ("linux/amd64", "linux/arm64") and i.platform_source for i in imgs)
    osi = shipped.os_info("ubuntu26.04")
    assert osi is not None and str(osi.python_default) == "3.14" and osi.status == "unconfirmed"


def test_a_row_may_claim_ubuntu_26_04(tmp_path):
    row = tmp_path / "r.toml"
    row.write_text('schema = 1\nkind = "framework"\nframework = "torch"\n[[build]]\nversion = "9.1.0"\nvariant = "cu133"\n'
                   'cuda = "13.3"\npython = ["3.14"]\npackages = ["torch==9.1.0"]\nsass = ["9.0"]\nos = ["ubuntu26.04"]\n'
                   'platforms = ["linux/amd64", "linux/arm64"]\nplatform_source = ["test"]\nsource = ["test"]\nstatus = "confirmed"\n')
    m = load_matrix([row])
    assert validate(m) == []
    for name, plat in (("torch-9.1-cuda13.3", "linux/amd64"), ("torch-9.1-cuda13.3-arm64", "linux/arm64")):
        s = resolve(m, name)
        assert (s.base_image, s.os, s.python, s.python_strategy, s.platform) == (
            "nvidia/cuda:13.3.1-base-ubuntu26.04", "ubuntu26.04", "3.14", "apt", plat)


@pytest.mark.parametrize("change, words", [
    ({"freethreaded": "$(reboot)"}, "freethreaded '$(reboot)' is not safe to render: expected true or false"),
    ({"python_strategy": "apt"}, "python_strategy 'apt' is not safe to render: expected 'standalone' for a free-threaded Python"),
])
def test_a_tampered_free_threaded_stack_is_refused_before_rendering(shipped, change, words):
    from envman.errors import RenderError
    from envman.render.dockerfile import render_stack

    s = replace(resolve(shipped, "torch-2.12-py3.14t"), **change)
    with pytest.raises(RenderError) as exc:
        render_stack(s, probe=b"# probe\n")
    assert words in exc.value.line()
