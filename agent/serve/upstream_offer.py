"""What the servers' prompts and resources become when `tooltree serve` offers them (`agent.serve.upstream_extras`):
names that say their server, texts cleaned and capped, and whatever cannot be offered safely left out (logged).

A prompt is offered as ``<server>__<prompt>`` (the passthrough tools' names, `agent.naming`); an argument whose name
is not clean is offered under a clean one and renamed back when the prompt is got (`PromptRoute`). A name or URI
that goes back to the server (a prompt's, a resource's, a template's) must be a clean string of bounded length, or
its item is left out; a resource's name is shown as ``<server>__<name>``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from pydantic import ValidationError

from agent.naming import SEPARATOR, _clean, _fit  # the passthrough tools' names
from agent.serve.passthrough import TITLE_CHARS
from tool_tree.text import clean, one_line

logger = logging.getLogger(__name__)

MAX_ARGUMENTS = 64
"""Arguments of one prompt offered; a prompt with more is left out."""
NAME_CHARS = 1_000
"""The longest name of a prompt, argument or resource kept (the name is sent back to the server exactly)."""
SHOWN_CHARS = 200
"""The longest resource name shown (cleaned, on one line)."""
URI_CHARS = 4_096
"""The longest URI or URI template kept; a longer one is left out."""
DESCRIPTION_CHARS = 4_000
"""The most of a description offered, as a passthrough tool's (`agent.toolsets.direct.DESCRIPTION_CHARS`)."""
MIME_CHARS = 200
TEMPLATE_EXPRESSIONS = 10
"""Expressions (``{...}``) of a URI template that routes reads; one with more routes none (it is still listed)."""


class NotKept(Exception):
    """An item of a server's list that is not offered (why: in serve's log)."""


@dataclass
class Found:
    """One server's lists, as it answered them (raw dicts, bounded in number), and whether it declares resource
    subscriptions (`tool_tree.snapshot_lists.subscribes`)."""

    prompts: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)
    subscribe: bool = False


@dataclass(frozen=True)
class PromptRoute:
    """Where an offered prompt goes: its server, its own name, its arguments' own names by offered name, and the
    offered names of those it says are required."""

    server: str
    name: str
    arguments: dict[str, str]
    required: tuple[str, ...] = ()


@dataclass
class Offered:
    """Everything offered, from what the tree records (rebuilt whole at each reading of it)."""

    prompts: list[types.Prompt] = field(default_factory=list)
    routes: dict[str, PromptRoute] = field(default_factory=dict)
    resources: list[types.Resource] = field(default_factory=list)
    owners: dict[str, list[str]] = field(default_factory=dict)
    """The servers that listed each URI."""
    templates: list[types.ResourceTemplate] = field(default_factory=list)
    matchers: list[tuple[str, Any]] = field(default_factory=list)
    """(server, the RE2 pattern of one of its templates: `template_pattern`)."""
    subscribing: set[str] = field(default_factory=set)
    """The servers that declare resource subscriptions and of which a resource or template is offered."""


def text_field(value: Any, limit: int) -> str | None:
    """A description or title: cleaned, stripped, at most ``limit`` characters (cut with "…"); None when absent."""
    if not isinstance(value, str):
        return None
    text = clean(value[: limit * 2]).strip()
    if not text:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


def exact(value: Any, limit: int) -> str:
    """A name or URI sent back to the server as it is: a string of 1 to ``limit`` characters that cleaning leaves
    as it is (no escape, control, bidi or zero-width character).

    Raises:
        NotKept: it is not.
    """
    if not isinstance(value, str) or not value or len(value) > limit or clean(value) != value or "\n" in value:
        raise NotKept(f"a name or URI that is not a clean string of at most {limit:,} characters")
    return value


def _mime(value: Any) -> str | None:
    return value if isinstance(value, str) and len(value) <= MIME_CHARS and clean(value) == value else None


def _prompt(server: str, raw: dict[str, Any], name: str) -> tuple[types.Prompt, PromptRoute]:
    own = exact(raw.get("name"), NAME_CHARS)
    given = raw.get("arguments") or []
    if not isinstance(given, list) or len(given) > MAX_ARGUMENTS:
        raise NotKept(f"arguments that are not a list of at most {MAX_ARGUMENTS}")
    arguments: list[types.PromptArgument] = []
    names: dict[str, str] = {}
    for argument in given:
        if not isinstance(argument, dict):
            raise NotKept("an argument that is not an object")
        original = argument.get("name")
        if not isinstance(original, str) or not original or len(original) > NAME_CHARS:
            raise NotKept(f"an argument without a name of at most {NAME_CHARS:,} characters")
        offered, n = _fit(_clean(original)) if clean(original) != original else original, 2
        while offered in names:
            offered, n = _fit(_clean(original), f"_{n}"), n + 1
        names[offered] = original
        required = argument.get("required")
        arguments.append(
            types.PromptArgument(
                name=offered,
                title=text_field(argument.get("title"), TITLE_CHARS),
                description=text_field(argument.get("description"), DESCRIPTION_CHARS),
                required=required if isinstance(required, bool) else None,
            )
        )
    prompt = types.Prompt(
        name=name,
        title=text_field(raw.get("title"), TITLE_CHARS),
        description=text_field(raw.get("description"), DESCRIPTION_CHARS),
        arguments=arguments or None,
    )
    return prompt, PromptRoute(server, own, names, tuple(a.name for a in arguments if a.required))


def _shown_name(server: str, raw: dict[str, Any], fallback: str) -> str:
    name = raw.get("name")
    return one_line(f"{server}{SEPARATOR}{clean(name if isinstance(name, str) else fallback)}", SHOWN_CHARS)


def _resource(server: str, raw: dict[str, Any]) -> types.Resource:
    uri = exact(raw.get("uri"), URI_CHARS)
    size = raw.get("size")
    return types.Resource(
        name=_shown_name(server, raw, uri),
        title=text_field(raw.get("title"), TITLE_CHARS),
        uri=uri,
        description=text_field(raw.get("description"), DESCRIPTION_CHARS),
        mime_type=_mime(raw.get("mimeType")),
        size=size if isinstance(size, int) and not isinstance(size, bool) and 0 <= size < 2**53 else None,
    )


def _template(server: str, raw: dict[str, Any]) -> types.ResourceTemplate:
    template = exact(raw.get("uriTemplate"), URI_CHARS)
    return types.ResourceTemplate(
        name=_shown_name(server, raw, template),
        title=text_field(raw.get("title"), TITLE_CHARS),
        uri_template=template,
        description=text_field(raw.get("description"), DESCRIPTION_CHARS),
        mime_type=_mime(raw.get("mimeType")),
    )


_EXPRESSION = re.compile(r"\{([^{}]*)\}")


def template_pattern(template: str) -> Any:
    """The URIs a URI template (RFC 6570) can expand to, as an RE2 pattern (matching time linear in the URI, whatever
    the template: a backtracking regex of ten expressions between literals took hours on a URI of 4,096 characters,
    and matched on serve's event loop); None when it has more than `TEMPLATE_EXPRESSIONS` expressions or RE2 refuses
    it. A simple expression (``{id}``) matches no ``/``, ``?`` or ``#``; one that may expand to those (``{+path}``,
    ``{#frag}``, ``{/segments}``, ``{?query}``, ``{&more}``) matches anything."""
    import re2  # type: ignore[import-untyped]

    parts: list[str] = []
    last, previous_end = 0, -1
    for count, match in enumerate(_EXPRESSION.finditer(template), 1):
        if count > TEMPLATE_EXPRESSIONS:
            return None
        literal = template[last : match.start()]
        if literal:
            parts.append(re2.escape(literal))
        operator = match.group(1)[:1]
        wide = operator in ("+", "#", "/", "?", "&", ";", ".")
        if previous_end == match.start() and parts:  # adjacent to the previous expression: one group
            parts[-1] = ".*" if wide or parts[-1] == ".*" else parts[-1]
        else:
            parts.append(".*" if wide else "[^/?#]*")
        last = previous_end = match.end()
    if template[last:]:
        parts.append(re2.escape(template[last:]))
    options = re2.Options()
    options.never_capture, options.log_errors, options.dot_nl = True, False, True
    try:
        return re2.compile("".join(parts), options)
    except (re2.error, UnicodeEncodeError):
        return None


def offered(found: dict[str, Found], *, prompts: bool, resources: bool) -> Offered:
    """What ``found`` (by server) offers, in (server, item) order; what is not fit to offer is left out (logged)."""
    out = Offered()
    suffix: dict[str, int] = {}  # by first name tried: the next suffix to try (from 2 each time was quadratic)
    for server in sorted(found):
        lists, kept = found[server], 0  # its resources and templates offered
        for raw in lists.prompts if prompts else ():
            own = raw["name"] if isinstance(raw.get("name"), str) else ""
            base = f"{_clean(server)}{SEPARATOR}{_clean(own)}"
            first = name = _fit(base)
            n = suffix.get(first, 2)
            while name in out.routes:
                name, n = _fit(base, f"_{n}"), n + 1
            suffix[first] = n
            try:
                prompt, route = _prompt(server, raw, name)
            except (NotKept, ValidationError) as e:
                logger.info("%s: a prompt left out: %s", server, why(e))
                continue
            out.prompts.append(prompt)
            out.routes[name] = route
        for raw in lists.resources if resources else ():
            try:
                resource = _resource(server, raw)
            except (NotKept, ValidationError) as e:
                logger.info("%s: a resource left out: %s", server, why(e))
                continue
            owners = out.owners.setdefault(resource.uri, [])
            kept += 1
            if server not in owners:
                owners.append(server)
                out.resources.append(resource)
        for raw in lists.templates if resources else ():
            try:
                template = _template(server, raw)
            except (NotKept, ValidationError) as e:
                logger.info("%s: a resource template left out: %s", server, why(e))
                continue
            out.templates.append(template)
            kept += 1
            if (pattern := template_pattern(template.uri_template)) is not None:
                out.matchers.append((server, pattern))
        if lists.subscribe and kept:
            out.subscribing.add(server)
    return out


def why(e: Exception) -> str:
    return one_line(str(e), 300)
