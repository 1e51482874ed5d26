"""The one Jinja environment (envman/render/template.py): strict, templates that only print the
layout's steps, and a missing template one error line."""

from __future__ import annotations


import jinja2
import jinja2.nodes as jn
import pytest

from envman.errors import RenderError
from envman.render.options import RenderOptions
from envman.render.plan import stack_plan
from envman.render.template import jinja_env, render_dockerfile
from tests.unit.render.test_dockerfile import make_stack
from tests.unit.render.test_layerplan import project


TEMPLATES = ("Dockerfile.j2", "project.Dockerfile.j2", "base.Dockerfile.j2")


@pytest.mark.parametrize("name", TEMPLATES)
def test_a_template_decides_nothing_and_reads_only_the_steps(name):
    """No if, macro, import or expression: every branch is taken in envman/render/layout.py, every
    instruction written by envman/render/steps.py."""
    env = jinja_env()
    tree = env.parse(env.loader.get_source(env, name)[0])  # type: ignore[union-attr]
    for kind in (jn.If, jn.CondExpr, jn.Macro, jn.Import, jn.FromImport, jn.Include, jn.Extends, jn.Assign, jn.Filter,
                 jn.Call, jn.Compare, jn.Getitem):
        assert not list(tree.find_all(kind)), (name, kind.__name__)
    loops = list(tree.find_all(jn.For))
    assert len(loops) == 1 and isinstance(loops[0].iter, jn.Name) and loops[0].iter.name == "steps"
    assert {n.name for n in tree.find_all(jn.Name)} == {"steps", "step"}
    assert {g.attr for g in tree.find_all(jn.Getattr)} == {"text"}


def test_strict_rendering_refuses_what_the_plan_lacks():
    plan = stack_plan(make_stack(), RenderOptions(), [])
    for source in ("{{ plan.no_such_section }}", "{% if plan.base.no_such_field %}x{% endif %}"):
        with pytest.raises(jinja2.UndefinedError):
            jinja_env().from_string(source).render(plan=plan)


def test_a_missing_template_is_one_error_line(tmp_path, monkeypatch):
    import shutil

    from envman.render import template as T
    from envman.paths import templates_dir

    copy = tmp_path / "dockerfiles"
    shutil.copytree(templates_dir(), copy)
    (copy / "project.Dockerfile.j2").unlink()
    monkeypatch.setattr("envman.paths.templates_dir", lambda: copy)
    T.jinja_env.cache_clear()
    try:
        with pytest.raises(RenderError) as err:
            render_dockerfile(project(apt=("git",)))
        assert "project.Dockerfile.j2 is missing" in err.value.what and "\n" not in str(err.value)
    finally:
        T.jinja_env.cache_clear()


def test_jinja_environment_is_strict():
    import jinja2

    from envman.render.template import jinja_env

    env = jinja_env()
    assert env.undefined is jinja2.StrictUndefined and not env.autoescape
    assert env.trim_blocks and env.lstrip_blocks and env.keep_trailing_newline
    with pytest.raises(jinja2.UndefinedError):
        env.get_template("Dockerfile.j2").render()
