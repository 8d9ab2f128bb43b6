"""A YAML syntax error points at the line to fix, not at the end of the file where PyYAML noticed it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tool_tree.config import ConfigError, load_config


def error_of(tmp_path: Path, text: str) -> ConfigError:
    path = tmp_path / "y2.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return info.value


def test_an_unclosed_quote_is_reported_on_its_own_line_with_where_the_file_ended(tmp_path: Path) -> None:
    error = error_of(tmp_path, 'servers:\n  a:\n    command: "python\n    args: []\n')
    assert error.line == 3
    assert str(error) == (
        f"{tmp_path / 'y2.yaml'}:3: invalid YAML: while scanning a quoted scalar: found unexpected end of stream "
        "(at line 5)"
    )


def test_an_unclosed_bracket_is_reported_on_the_line_that_opened_it(tmp_path: Path) -> None:
    error = error_of(tmp_path, "servers:\n  a:\n    command: python\n    args: [x, y\n")
    assert error.line == 4
    assert error.message == (
        "invalid YAML: while parsing a flow sequence: expected ',' or ']', but got '<stream end>' (at line 5)"
    )


def test_an_unclosed_brace_followed_by_more_lines_is_reported_where_it_opened(tmp_path: Path) -> None:
    error = error_of(tmp_path, "servers:\n  a: {command: python\n  b:\n    command: x\n")
    assert error.line == 2
    assert error.message.startswith("invalid YAML: while parsing a flow mapping: ")


def test_a_key_indented_wrong_is_reported_on_its_own_line_naming_where_its_mapping_began(tmp_path: Path) -> None:
    # A block mapping's context marks where it began: the line to fix is the problem's.
    error = error_of(tmp_path, "servers:\n  a:\n    command: python\n   bad: 1\n")
    assert error.line == 4
    assert error.message == (
        "invalid YAML: while parsing a block mapping (at line 2): expected <block end>, but found "
        "'<block mapping start>'"
    )


def test_a_duplicate_anchor_is_reported_on_its_second_use_naming_the_first(tmp_path: Path) -> None:
    error = error_of(tmp_path, "servers:\n  a: &x {command: p}\n  b: &x {command: q}\n")
    assert error.line == 3
    assert error.message == "invalid YAML: found duplicate anchor 'x'; first occurrence (at line 2): second occurrence"


def test_a_syntax_error_without_a_context_keeps_the_problems_line(tmp_path: Path) -> None:
    error = error_of(tmp_path, "servers:\n  a: b: c\n")
    assert error.line == 2 and error.message == "invalid YAML: mapping values are not allowed here"


def test_a_tab_indenting_a_line_says_yaml_takes_spaces(tmp_path: Path) -> None:
    # Before: "found character '\t' that cannot start any token", and no word of what to do.
    error = error_of(tmp_path, "servers:\n  a:\n    command: python\n\targs: []\n")
    assert error.line == 4
    assert error.message == (
        "invalid YAML: found character '\\t' that cannot start any token (YAML indents with spaces, not tabs)"
    )


@pytest.mark.parametrize(
    ("line", "context"),
    [
        ("args: [--token, ${TOKEN}]", "flow sequence: expected ',' or ']'"),
        ("env: {A: ${B}}", "flow mapping: expected ',' or '}'"),
    ],
)
def test_a_variable_unquoted_inside_brackets_says_to_quote_it(tmp_path: Path, line: str, context: str) -> None:
    # Written so in a block (`A: ${B}`) it is text; inside [ ] or { } its `{` is YAML's. Before: "but got '{'" alone.
    error = error_of(tmp_path, f"servers:\n  a:\n    command: python\n    {line}\n")
    assert error.line == 4
    assert error.message == (
        f"invalid YAML: while parsing a {context}, but got '{{' (inside [ ] or {{ }}, YAML reads the {{ of ${{...}} as "
        "its own: write the item holding it in quotes)"
    )
    quoted = line.replace("${TOKEN}", '"${TOKEN}"').replace("${B}", '"${B}"')
    path = tmp_path / "quoted.yaml"
    path.write_text(f"servers:\n  a:\n    command: python\n    {quoted}\n", encoding="utf-8")
    server = load_config(path, environ={"TOKEN": "t", "B": "b"}).servers[0]
    assert (server.args, dict(server.env)) in ((("--token", "t"), {}), ((), {"A": "b"}))


def test_a_yaml_1_2_directive_is_refused_rather_than_read_by_other_rules(tmp_path: Path) -> None:
    # Before: read by YAML 1.1's rules all the same: `enabled: off` was false, though 1.2 reads it as text.
    error = error_of(tmp_path, "# tooltree\n%YAML 1.2\n---\nservers:\n  a: {command: x, enabled: off}\n")
    assert error.line == 2 and error.key is None
    assert error.message.startswith("%YAML 1.2: tooltree reads YAML by the rules of 1.1, where on, off, yes and no ")
    assert "remove the line" in error.message
    path = tmp_path / "y11.yaml"
    path.write_text("%YAML 1.1\n---\nservers:\n  a: {command: x, enabled: off}\n", encoding="utf-8")
    assert load_config(path).servers[0].enabled is False


def test_a_tab_after_a_value_before_a_comment_or_after_a_key_is_white_space(tmp_path: Path) -> None:
    # Before: each made the file "invalid YAML: found character '\t' that cannot start any token (YAML indents with
    # spaces, not tabs)", though every line was indented with spaces; libyaml and the YAML spec take them as blanks.
    path = tmp_path / "tabs.yaml"
    text = "servers:\t# mine\n  a:\n    command:\tpython\t# the venv's\n    args: [-m,\tx]\t\n    timeout: 5\t\n\t\n"
    path.write_text(text, encoding="utf-8")
    server = load_config(path).servers[0]
    assert (server.command, server.args, server.timeout) == ("python", ("-m", "x"), 5.0)
    error = error_of(tmp_path, text + "    timout: 3\n")
    assert error.line == 7 and error.key == "servers.a.timout"


@pytest.mark.parametrize(
    ("line", "hint"),
    [
        ("command: py\tthon", "a tab inside a value that is not quoted: quote the value, or write a space"),
        ("args:\n      -\tx", "a tab after `-` would set the next lines' indentation: write a space"),
    ],
)
def test_a_tab_that_is_not_white_space_says_what_to_write(tmp_path: Path, line: str, hint: str) -> None:
    # Before: "(YAML indents with spaces, not tabs)", of a line indented with spaces.
    error = error_of(tmp_path, f"servers:\n  a:\n    {line}\n")
    assert error.message == f"invalid YAML: found character '\\t' that cannot start any token ({hint})"


@pytest.mark.parametrize("header", ["|", ">", "|-", ">+", "|2"])
def test_a_tab_after_a_block_scalars_header_says_what_to_write(tmp_path: Path, header: str) -> None:
    # Before: "while scanning a block scalar: expected chomping or indentation indicators, but found '\t'", and no more,
    # of an invisible tab at the end of `description: |`.
    error = error_of(tmp_path, f"servers:\n  a:\n    command: x\n    description: {header}\t\n      hello\n")
    assert error.line == 4
    assert error.message.endswith("(tooltree reads no tab after a block scalar's | or >: write a space, or nothing)")


@pytest.mark.parametrize("odd", ["\u2028", "\u2029", "\x85"])
@pytest.mark.parametrize("quoted", [True, False])
def test_a_line_after_a_unicode_line_separator_is_named_as_an_editor_counts_it(
    tmp_path: Path, odd: str, quoted: bool
) -> None:
    # Before: YAML 1.1 reads NEL, U+2028 and U+2029 as line breaks, editors do not, and each error after a description
    # holding one named a line past the one an editor shows (line 5 of a file of 4).
    value = f'"x{odd}y"' if quoted else f"x{odd}y"
    error = error_of(tmp_path, f"servers:\n  a:\n    description: {value}\n    comand: x\n")
    if quoted:
        assert (error.line, error.key) == (4, "servers.a.comand")
    else:  # YAML reads `y` as a key on a line of its own (the file is read as before): where it is, line 3
        assert (error.line, error.message) == (
            3,
            "invalid YAML: while scanning a simple key: could not find expected ':' (at line 4)",
        )
    path = tmp_path / "tooltree.yaml"
    path.write_text(f'servers:\n  a:\n    description: "x{odd}y"\n    command: x\n', encoding="utf-8")
    assert load_config(path).servers[0].description == ("x y" if odd == "\x85" else f"x{odd}y")  # as before
