"""The console's templates: the only ``jinja2`` (and ``markupsafe``) import.

Templates live in ``raftsched/web/templates`` (package data, shipped in the wheel) and are
rendered with autoescaping on, so every value from the cluster (task names, commands, output
tails) is HTML-escaped unless a template says otherwise (none does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jinja2
import markupsafe  # jinja2's own escaping library

__all__ = ["Renderer", "trusted_html"]


def trusted_html(text: str) -> Any:
    """``text`` as HTML the templates output as it is (not escaped again): only for markup a view
    built itself with every value in it escaped (the task list's fire strips)."""
    return markupsafe.Markup(text)


class Renderer:
    """Renders a named template with a context. Thread-safe: the environment is built once and
    only read afterwards (Jinja2 compiles each template once and caches it)."""

    def __init__(self, filters: Mapping[str, Callable[..., Any]], globals_: Mapping[str, Any]) -> None:
        self._env = jinja2.Environment(
            loader=jinja2.PackageLoader("raftsched.web", "templates"),
            autoescape=jinja2.select_autoescape(["html", "svg"], default=True),
            undefined=jinja2.StrictUndefined,  # a misspelt variable is a bug, not an empty cell
            trim_blocks=True,
            lstrip_blocks=True,
            # The templates ship in the package and do not change under a running node: no
            # stat of the template file on every render to see whether it did.
            auto_reload=False,
        )
        self._env.filters.update(filters)
        self._env.globals.update(globals_)

    def render(self, name: str, context: Mapping[str, Any]) -> str:
        return self._env.get_template(name).render(context)
