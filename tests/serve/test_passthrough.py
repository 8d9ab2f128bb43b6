"""`Passthrough`: an upstream tool offered as a tool of `tooltree serve`, its definition and result cleaned
like the tree's stubs and a script's output, and its text capped like a script's output.

In process, with a real upstream (tests/servers/raw_server.py) behind a real `Runtime` (no sandbox is started:
a passthrough call goes from the runtime's bridge to the server).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent.serve.passthrough import Passthrough, capped
from sandbox.config import SandboxConfig
from sandbox.host import Runtime
from tests.support import raw_server_tree

ESCAPES = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b[1;31mRED\x1b[0m\u202etxt.exe\x9b2J"
TOOLS = [
    {
        "name": "say",
        "description": "Says a text.\x1b]52;c;cHduZWQ=\x07\x1b[2J\u202eevil",
        "inputSchema": {
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "What to say\x1b[31m."},
                "mode": {"enum": ["a\x1b"], "default": "a\x1b"},
                "structured": {"type": "object"},
            },
        },
    },
    {"name": "big", "inputSchema": {"type": "object", "properties": {"chars": {"type": "integer"}}}},
]


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Passthrough, Runtime]]:
    from tooltree_cli.common import load

    folder = tmp_path_factory.mktemp("passthrough")
    tree, _ = raw_server_tree(folder, TOOLS)
    with Runtime(load(folder / "tooltree.yaml"), tree, sandbox_config=SandboxConfig()) as runtime:
        yield Passthrough(tree, ["raw.say", "raw.big"]), runtime


def test_a_description_is_cleaned_like_the_trees_and_values_are_left_alone(
    upstream: tuple[Passthrough, Runtime],
) -> None:
    passthrough, runtime = upstream
    say = next(d for d in passthrough.definitions if d.name == "raw__say")
    assert say.description == "Says a text.]52;c;cHduZWQ=[2Jevil"  # as in the stub: the escapes' ESC and BEL gone
    assert say.input_schema["properties"]["text"]["description"] == "What to say[31m."
    # values a call may send stay as the server's schema has them: the bridge validates against that schema
    assert say.input_schema["properties"]["mode"] == {"enum": ["a\x1b"], "default": "a\x1b"}
    stub = (runtime.tree / "servers" / "raw" / "say.py").read_text(encoding="utf-8")
    assert "Says a text.]52;c;cHduZWQ=[2Jevil" in stub


def test_a_result_is_cleaned_like_a_scripts_output(upstream: tuple[Passthrough, Runtime]) -> None:
    passthrough, runtime = upstream
    result = passthrough.call("raw__say", {"text": f"ok{ESCAPES}", "structured": {"k\x1b[31m": ESCAPES}}, runtime)
    assert not result.is_error
    assert [c.text for c in result.content] == ["okREDtxt.exe"]  # type: ignore[union-attr]
    assert result.structured_content == {"k": "REDtxt.exe"}


def test_a_huge_result_is_capped_like_a_scripts_output_with_a_note(upstream: tuple[Passthrough, Runtime]) -> None:
    passthrough, runtime = upstream
    cap = SandboxConfig().output_chars
    result = passthrough.call("raw__big", {"chars": 1_000_000}, runtime)
    text, note = (c.text for c in result.content)  # type: ignore[union-attr]
    assert text == "x" * cap
    assert f"{1_000_000 - cap:,} of 1,000,000 characters of text cut" in note
    assert f"capped at {cap:,} characters" in note and "execute_python" in note


def test_text_blocks_share_the_cap_and_large_structured_content_is_left_out() -> None:
    raw = {
        "content": [
            {"type": "text", "text": "a" * 6},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///r", "text": "b" * 6}},
            {"type": "text", "text": "c" * 6},
        ],
        "structuredContent": {"rows": "d" * 10},
    }
    out = capped(raw, 10)
    assert [b.get("text") or b.get("resource", {}).get("text") for b in out["content"][:3]] == ["a" * 6, None, "bbbb"]
    assert "structuredContent" not in out
    assert "8 of 18 characters of text cut; the structured content left out" in out["content"][-1]["text"]
    assert capped({"content": [{"type": "text", "text": "short"}], "structuredContent": {}}, 10) == {
        "content": [{"type": "text", "text": "short"}],
        "structuredContent": {},
    }
