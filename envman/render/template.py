"""The one way a Dockerfile is written: a :class:`~envman.render.plan.DockerfilePlan` through the
strict Jinja environment over ``templates/dockerfiles``.

Strict: a name or attribute the plan does not have is an error (``StrictUndefined``), never an
empty ``FROM``; no HTML escaping (it would turn ``&&`` into ``&amp;&amp;``); block tags leave no
blank lines; the output keeps its last newline. The templates receive the plan as ``plan`` and
nothing else.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import jinja2

    from envman.render.plan import DockerfilePlan


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
    installation is a :class:`~envman.errors.RenderError`)."""
    import jinja2

    from envman.errors import RenderError
    from envman.paths import templates_dir

    try:
        return jinja_env().get_template(plan.template).render(plan=plan)
    except jinja2.TemplateNotFound as exc:  # the template, or one it imports
        raise RenderError(f"template file {exc.name} is missing", where=str(templates_dir()),
                          fix="reinstall envman (pip install -e . in a checkout)") from None
