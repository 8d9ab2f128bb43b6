"""The Python names the README's prose cites (`Sandbox.list_folder(path, limit=1000)`, `agent.errors.failed_run(e)`,
…) exist where it says, take the arguments it shows, and have the defaults it quotes.

Before: the README showed `Sandbox.list_folder(path, limit=500)` (its default is 1,000) and `generate(config, out)`
without saying where to import it from."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from typing import Any

from sandbox.config import SETTINGS as SANDBOX_SETTINGS

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")

CLASSES = {
    "Agent": "agent",
    "BackgroundPool": "tool_tree.pool",
    "ServerPool": "tool_tree.pool",
    "ModelAPIError": "agent.errors",
    "Runtime": "sandbox.host",
    "Sandbox": "sandbox",
    "SandboxPool": "sandbox",
}
"""The classes the README names bare, and the module each comes from."""
PACKAGES = ("agent", "generator", "sandbox", "tool_tree", "tooltree_cli")


def cited() -> list[str]:
    """The README's code spans that name a Python object of tooltree: ``Sandbox.reset()``, ``agent.errors.…``.
    Spans that are config keys (``sandbox.memory``) are not."""
    spans = set(re.findall(r"`([A-Za-z_][\w.]*(?:\([^`]*\))?)`", README))
    config_keys = {f"sandbox.{key}" for key in SANDBOX_SETTINGS}
    return sorted(
        span
        for span in spans
        if span.split("(")[0] not in config_keys
        and (span.split(".")[0].split("(")[0] in CLASSES or span.split(".")[0] in PACKAGES)
    )


def resolve(dotted: str) -> Any:
    """The object ``dotted`` names: a bare class from `CLASSES`, else the longest importable module prefix and its
    attributes."""
    first, *rest = dotted.split(".")
    if first in CLASSES:
        obj = getattr(importlib.import_module(CLASSES[first]), first)
    else:
        parts = dotted.split(".")
        for end in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:end]))
            except ModuleNotFoundError:
                continue
            rest = parts[end:]
            break
        else:
            raise AssertionError(f"`{dotted}`: no module of it imports")
    for name in rest:
        if not hasattr(obj, name) and inspect.isclass(obj) and name in inspect.signature(obj).parameters:
            return obj  # an attribute every instance has: set from its constructor's argument (`.advice`)
        obj = getattr(obj, name)
    return obj


def test_the_readme_cites_the_api_it_documents() -> None:
    names = {span.split("(")[0] for span in cited()}
    assert {"Sandbox.list_folder", "agent.errors.failed_run", "generator.generate.generate", "SandboxPool"} <= names


def test_every_python_name_the_readme_cites_exists() -> None:
    missing = []
    for span in cited():
        try:
            resolve(span.split("(")[0])
        except (AttributeError, ImportError, AssertionError) as e:
            missing.append(f"`{span}`: {e}")
    assert missing == []


def test_every_call_the_readme_shows_takes_its_arguments_and_quotes_its_defaults() -> None:
    wrong = []
    for span in (s for s in cited() if "(" in s):
        call = ast.parse(span.replace("...", "None"), mode="eval").body
        assert isinstance(call, ast.Call), span
        target = resolve(span.split("(")[0])
        signature = inspect.signature(target)
        method = inspect.isfunction(target) and "." in target.__qualname__ and "self" in signature.parameters
        positional = [None] * (len(call.args) + method)
        try:
            signature.bind(*positional, **{k.arg: None for k in call.keywords if k.arg})
        except TypeError as e:
            wrong.append(f"`{span}`: {e}")
            continue
        for keyword in call.keywords:  # `limit=1000`: a number shown is the default
            if isinstance(keyword.value, ast.Constant) and isinstance(keyword.value.value, int | float):
                default = signature.parameters[str(keyword.arg)].default
                if default != keyword.value.value:
                    wrong.append(f"`{span}`: {keyword.arg} defaults to {default!r}")
    assert wrong == []
