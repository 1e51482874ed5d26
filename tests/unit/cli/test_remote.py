"""`envman push` and `envman pull` (envman/cli/remote.py): a STACK|PROJECT argument read as a stack
name, a project path or a registered project; input refused before any engine is asked (a bad
digest, no registry, a target that names nothing), each in one line with exit code 2."""

from __future__ import annotations

import pytest

from tests.unit.conftest import MINI


@pytest.fixture
def envman(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "s"))
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/envman-test.sock")  # any engine call fails loudly
    monkeypatch.chdir(tmp_path)

    def run(*argv: str) -> tuple[int, str, str]:
        from envman.cli import main

        matrix = [w for p in MINI for w in ("--matrix", str(p))]
        with pytest.raises(SystemExit) as e:
            main([*matrix, *argv])
        out, err = capsys.readouterr()
        return (e.value.code or 0), out, err

    return run


@pytest.mark.parametrize("argv, says", [
    (["pull", "torch-2.4-cpu", "--digest", "sha256:abc"], "digest"),
    (["pull", "torch-2.4-cpu", "--digest", "sha256:" + "0" * 64 + "; id"], "digest"),
    (["push", "torch-2.4-cpu"], "registry"),  # none given and none configured
    (["push", "Not A Stack!", "--registry", "reg.example:5000"], "neither a stack name nor a registered project"),
    (["pull", "torch-2.4-cpu", "--registry", "reg.example:5000/$(id)"], "registry"),
])
def test_bad_input_is_one_line_exit_2_before_the_engine_is_asked(envman, argv, says):
    code, out, err = envman(*argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert says in err and "nonexistent" not in err


def test_a_project_path_names_its_stack(envman, tmp_path, monkeypatch):
    from envman.cli.remote import target_stack
    from envman.cli import matrix_source

    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "envman.toml").write_text('stack = "torch-2.4-cpu"\nname = "proj"\n')
    monkeypatch.setattr("envman.cli.matrix_source", lambda: type(matrix_source())(tuple(str(p) for p in MINI)))
    stack, project = target_stack("./proj")
    assert project is not None and project.name == "proj" and stack.name.startswith("torch-2.4")
    stack2, none = target_stack("torch-2.4-cpu")
    assert none is None and stack2 == stack
