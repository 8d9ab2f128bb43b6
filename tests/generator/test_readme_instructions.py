"""A server's ``instructions`` (what it tells the model using it, at initialisation) are in its ``README.md``.

Before, they made at most the server's line in ``INDEX.md`` and were otherwise only in ``snapshots/``, which a
model does not read: server-everything's limits (``GZIP_ALLOWED_DOMAINS``, session-scoped resources) were lost.
"""

from __future__ import annotations

from typing import Any

from generator.index_files import MAX_INSTRUCTIONS
from generator.layout import ServerListing, plan_tree

# @modelcontextprotocol/server-everything 2026.8.31's instructions, as its initialize result gives them (cut).
EVERYTHING_INSTRUCTIONS = """# Everything Server – Server Instructions

Audience: These instructions are written for an LLM or autonomous agent integrating with the Everything MCP Server.
Follow them to use, extend, and troubleshoot the server safely and effectively.

## Cross-Feature Relationships

- `gzip-file-as-resource` creates session-scoped resources accessible only during the current session
- Enable `toggle-simulated-logging` before debugging to see server log messages

## Constraints & Limitations

- `gzip-file-as-resource`: Max fetch size controlled by `GZIP_MAX_FETCH_SIZE` (default 10MB), timeout by \
`GZIP_MAX_FETCH_TIME_MILLIS` (default 30s), allowed domains by `GZIP_ALLOWED_DOMAINS`
- Session resources are ephemeral and lost when the session ends
"""


def _tool(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"The {name} tool.", "inputSchema": {"type": "object", "properties": {}}}


def _readme(info: dict[str, Any], name: str = "everything") -> str:
    listing = ServerListing(name, [_tool("echo"), _tool("gzip-file-as-resource")], info=info)
    return plan_tree([listing]).files[f"servers/{name}/README.md"].decode()


def test_everything_readme_carries_its_instructions_after_the_tool_list() -> None:
    info = {"name": "mcp-servers/everything", "title": "Everything Reference Server"}
    readme = _readme({**info, "instructions": EVERYTHING_INSTRUCTIONS})
    before, heading, section = readme.partition("\n## Instructions from the server\n")
    assert heading and "- gzip_file_as_resource — The gzip-file-as-resource tool." in before
    quoted = [line for line in section.splitlines() if line]
    assert all(line == ">" or line.startswith("> ") for line in quoted)  # its headings and fences stay inside
    text = "\n".join(line[2:] for line in section.splitlines())
    assert "allowed domains by `GZIP_ALLOWED_DOMAINS`" in text
    assert "- Session resources are ephemeral and lost when the session ends" in text
    assert "# Everything Server – Server Instructions" in text
    assert readme.startswith("# everything\n\nEverything Reference Server\n")  # the summary line is as it was
    assert _readme(info) == before  # none given: the README is as it was


def test_instructions_are_cleaned_and_capped() -> None:
    hostile = "Use it.\x1b[2J\u202e\r\n```\n" + "x" * (MAX_INSTRUCTIONS + 500)
    readme = _readme({"instructions": hostile}, name="s")
    section = readme.partition("\n## Instructions from the server\n")[2]
    assert "\x1b" not in section and "\u202e" not in section and "\r" not in section
    assert section.splitlines()[-1].endswith("…") and len(section) < MAX_INSTRUCTIONS + 200
    assert "\n> ```\n" in section


def test_blank_or_non_text_instructions_add_nothing() -> None:
    plain = _readme({})
    assert _readme({"instructions": " \n\t"}) == plain
    assert _readme({"instructions": ["not", "text"]}) == plain
