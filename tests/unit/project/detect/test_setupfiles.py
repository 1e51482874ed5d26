"""``setup.py`` and ``setup.cfg``: read, never run, with the forms real repositories write."""

from __future__ import annotations

import pytest

from envman.project.detect.facts import COMMAND, PIN, RANGE
from envman.project.detect.setupfiles import MAX_TABLE_PINS, read_setup_cfg, read_setup_py
from tests.unit.project.detect.conftest import means


def test_setup_py_is_read_never_run(repo):
    r = repo({"setup.py": """\
        import os
        open("RAN", "w").write("setup.py was executed")
        REQS = ["torch>=1.4", "numpy"]
        extras = {"tf": ["tensorflow==2.4.0"]}
        setuptools.setup(
            name="paper",
            install_requires=REQS + ["torchvision==0.5.0"],
            extras_require=extras,
            python_requires=">=3.6",
        )
        """})
    got = read_setup_py(r, "setup.py")
    assert means(got) == [
        ("setup.py", 3, "torch >=1.4"), ("setup.py", 7, "torch as torchvision==0.5.0 needs it"),
        ("setup.py", 4, "tensorflow ==2.4.0"), ("setup.py", 9, "Python >=3.6")]
    assert next(s for s in got if s.fact.framework == "tensorflow").strength == RANGE  # an extra is never a pin
    assert not (r.root / "RAN").exists()


def test_setup_py_dependency_table_looked_up_by_name(repo):
    # the table pattern: requirement strings in a list, setup() given lookups of it
    r = repo({"setup.py": """\
        _deps = [
            "accelerate>=1.2.1",
            "torch==2.6.0",
            "tensorflow>=2.9,<2.16",
        ]
        deps = {b: a for a, b in ((x, x.split("=")[0]) for x in _deps)}
        extras = {"torch": [deps["torch"]]}
        setup(install_requires=[deps["accelerate"]], extras_require=extras, python_requires=">=3.10.9",
              keywords=["jax==0.4.1"], classifiers=["Programming Language :: Python :: 3"])
        """})
    got = read_setup_py(r, "setup.py")
    assert means(got) == [("setup.py", 8, "Python >=3.10.9"), ("setup.py", 3, "torch ==2.6.0"),
                          ("setup.py", 4, "tensorflow <2.16,>=2.9")]
    strengths = {s.fact.framework: s.strength for s in got if s.fact.framework}
    assert strengths == {"torch": COMMAND, "tensorflow": RANGE}  # never more than a command: no pin of setup() itself


def test_setup_py_requirements_in_a_dict_literal_by_constant_key(repo):
    r = repo({"setup.py": """\
        requirements = {
            "install": ["numpy", "tensorflow-gpu==2.7.0"],
            "setup": ["numpy"],
            "test": ["torch==1.0.0"],
        }
        install_requires = requirements["install"]
        setup(install_requires=install_requires, setup_requires=requirements["setup"],
              tests_require=requirements["test"], python_requires=requirements.get("python"))
        """})
    got = read_setup_py(r, "setup.py")
    assert means(got) == [("setup.py", 2, "tensorflow ==2.7.0 (GPU build)")]
    assert got[0].strength == PIN  # install_requires itself: the pin outweighs a base image


@pytest.mark.parametrize("lookup", ['reqs["missing"]', "reqs[key]", 'other["install"]', 'reqs["install"]["x"]', "reqs[0]"])
def test_setup_py_dict_lookups_that_name_nothing(repo, lookup):
    text = f'reqs = {{"install": ["torch==2.0.0"]}}\nkey = "install"\nsetup(install_requires={lookup})\n'
    got = read_setup_py(repo({"setup.py": text}), "setup.py")
    # nothing from the lookup itself; the table rule may still read the list, never as a pin
    assert all(s.strength != PIN for s in got)


def test_setup_py_list_built_inside_main_is_read(repo):
    r = repo({"setup.py": """\
        def main():
            tensorflow_pypi_dep = ['tensorflow == 1.15.4']
            install_requires = ['numpy'] + tensorflow_pypi_dep
            setup(name='x', install_requires=install_requires)
        main()
        """})
    assert means(read_setup_py(r, "setup.py")) == [("setup.py", 2, "tensorflow ==1.15.4")]


@pytest.mark.parametrize("n, read", [(MAX_TABLE_PINS - 1, MAX_TABLE_PINS - 1), (MAX_TABLE_PINS, MAX_TABLE_PINS),
                                     (MAX_TABLE_PINS + 1, MAX_TABLE_PINS), (50000, MAX_TABLE_PINS)])
def test_setup_py_table_reading_stops_at_its_limit(repo, n, read):
    table = ", ".join(f'"torch==1.{i % 14}.0"' for i in range(n))
    got = read_setup_py(repo({"setup.py": f"_deps = [{table}]\nsetup(install_requires=[])\n"}), "setup.py")
    assert len(got) == read


@pytest.mark.parametrize("text", [
    # setup() pins a framework itself: a table elsewhere is not read
    "_deps = ['torch==1.0.0']\nsetup(install_requires=['torch==2.0.0'])\n",
    # a list that is not all strings is no requirement table; a name alone pins nothing
    "x = ['torch==1.0.0', 3]\ny = ['torch']\nsetup(install_requires=open('r').read())\n",
    # the strings of setup()'s own arguments other than the requirements are not requirements
    "setup(keywords=['torch==1.0.0'], install_requires=[])\n",
])
def test_setup_py_tables_that_are_not_read(repo, text):
    got = read_setup_py(repo({"setup.py": text}), "setup.py")
    assert "torch ==1.0.0" not in [m for _, _, m in means(got)]


@pytest.mark.parametrize("text", ["print 'python 2'\n", "x = (" * 10000 + ")" * 10000, "setup(install_requires=open('r').read())"])
def test_setup_py_that_cannot_be_read_gives_nothing(repo, text):
    assert read_setup_py(repo({"setup.py": text}), "setup.py") == []


def test_setup_cfg(repo):
    r = repo({"setup.cfg": "[options]\npython_requires = >=3.7\ninstall_requires =\n    torch==1.9.0\n    numpy\n"
                           "[options.extras_require]\nexport = onnxruntime==1.8.0\n"})
    assert means(read_setup_cfg(r, "setup.cfg")) == [
        ("setup.cfg", 4, "torch ==1.9.0"), ("setup.cfg", 2, "Python >=3.7"), ("setup.cfg", 7, "onnxruntime ==1.8.0 (CPU build)")]
