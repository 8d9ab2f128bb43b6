"""The system prompts, rendered from the jinja2 templates in ``agent/templates/``.

Templates use ``StrictUndefined`` (a missing variable is an error, not an empty string) and keep
their trailing newline; nothing is HTML-escaped. A prompt is rendered once per run and never
changes during it.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def sandbox_holds(packages: Sequence[str] = ()) -> str:
    """What the sandbox has, said to a model that would otherwise ``import numpy`` or ``urlopen`` and try again: no
    network, and Python's standard library (with the ``packages`` of ``sandbox.pip_packages``, as they are given)."""
    added = f" and {', '.join(packages)}." if packages else " (no third-party packages)."
    return "The sandbox has no network, and only Python's standard library" + added
