"""The system prompts, rendered from the jinja2 templates in ``agent/templates/``.

Templates use ``StrictUndefined`` (a missing variable is an error, not an empty string) and keep
their trailing newline; nothing is HTML-escaped. A prompt is rendered once per run and never
changes during it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jinja2

TEMPLATES = Path(__file__).resolve().parent / "templates"


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(name: str, **variables: Any) -> str:
    """Render ``agent/templates/<name>``.

    Raises:
        jinja2.TemplateError: the template is missing or uses a variable that was not given.
    """
    return _environment().get_template(name).render(**variables).strip() + "\n"
