"""The one way a Dockerfile is written: a :class:`~envman.render.sections.DockerfilePlan` through the
strict Jinja environment over ``templates/dockerfiles``.

Strict: a name or attribute the plan does not have is an error (``StrictUndefined``), never an
empty ``FROM``; no HTML escaping (it would turn ``&&`` into ``&amp;&amp;``); block tags leave no
blank lines; the output keeps its last newline. The templates receive the plan as ``plan`` and
nothing else. Project and notebook layers go through the user's render cache
(:mod:`envman.render.rendercache`).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from envman.render import rendercache

if TYPE_CHECKING:
    import jinja2

    from envman.render.sections import DockerfilePlan
    from envman.render.steps import Step


@functools.lru_cache(maxsize=1)
def jinja_env() -> jinja2.Environment:
    import jinja2

    from envman.paths import templates_dir

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # HTML escaping would turn && into &amp;&amp;
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_dockerfile(plan: DockerfilePlan) -> str:
    """The Dockerfile ``plan`` describes, laid out by its template (a template missing from the
    installation is a :class:`~envman.errors.RenderError`). A project image's or the notebook
    layer's text comes from the user's render cache when this plan, these templates and this
    envman rendered it before (:mod:`envman.render.rendercache`): jinja2 is then not imported."""
    from envman.paths import templates_dir

    key = rendercache.render_key(plan, str(templates_dir()))
    text = rendercache.lookup(key) if key is not None else None
    if text is None:
        text = _render(plan)
        if key is not None:
            rendercache.store(key, text)
    return text


def _render(plan: DockerfilePlan) -> str:
    from envman.render.layout import dockerfile_steps

    return render_steps(plan.template, dockerfile_steps(plan))


def render_steps(template: str, steps: tuple[Step, ...]) -> str:
    """``steps`` (:mod:`envman.render.steps`), one instruction each, laid out by ``template``."""
    return _render_template(template, steps=steps)


def _render_template(template: str, **values: object) -> str:
    import jinja2

    from envman.errors import RenderError
    from envman.paths import templates_dir

    try:
        return jinja_env().get_template(template).render(**values)
    except jinja2.TemplateNotFound as exc:  # the template, or one it imports
        raise RenderError(f"template file {exc.name} is missing", where=str(templates_dir()),
                          fix="reinstall envman (pip install -e . in a checkout)") from None
