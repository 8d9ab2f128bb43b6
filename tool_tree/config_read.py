"""The reader under `tool_tree.config`: YAML (and JSON, which it reads as YAML) with every value's line.

PyYAML's safe composer builds the nodes (`tool_tree.config_compose`); `Reader` turns them into `Node` values that
keep their line, expanding aliases and merge keys (at most `MAX_VALUES` values once expanded, counted before they
are built: `tool_tree.config_aliases`; at most `MAX_DEPTH` levels), and reads them as strings (``${VAR}``
expanded), lists, mappings, numbers and booleans. Every problem is a `ConfigError` naming the file, the line and
the key (within `Reader.deferring`, an unset variable's is kept for the caller instead: a server's variables are
needed only when it is used). What a configuration holds is `tool_tree.config`'s; import `ConfigError` and the
bounds from there.

(Over 400 lines: the values of every format, their bounds and their variables are one reader's, each value read
in one place.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import difflib
import functools
import math
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tool_tree.config_aliases import Expansion
from tool_tree.text import clean, one_line

MAX_VALUES = 1_000_000
"""Values (mappings, lists, scalars) a configuration may hold, its YAML aliases expanded: 50 times a config of
ten thousand servers, and a bound on what a file of nested aliases (a "billion laughs") can make the reader build."""
MAX_DEPTH = 64
"""Levels of mappings and lists a configuration may nest (tooltree's own settings go 4 deep): the readers
recurse once a level, and 20,000 ``[`` ended in RecursionError."""


MAX_REPORTED = 20
"""Errors of one file a `ConfigError` shows at most; the rest are counted (``and 4 more errors``)."""
MAX_KEPT = 1000
"""Errors of one file kept at most: the reading stops at the thousandth (a file of a million duplicate keys would
otherwise hold a million errors)."""


class ConfigError(Exception):
    """The configuration is invalid. ``str()`` is one line, ``file:line: key: problem``, and one more for each other
    error found with it (``also``: the file's independent errors, reported at once, at most `MAX_REPORTED` lines then
    ``and N more``); ``message``, ``file``, ``line`` and ``key`` are the first's."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        key: str | None = None,
        also: Sequence[ConfigError] = (),
    ):
        self.message = message
        self.file = file
        self.line = line
        self.key = key
        self.also = tuple(also)
        where = _printable(file) if file else "<config>"
        if line is not None:
            where += f":{line}"
        # The file's names reach a terminal: its keys, a path it names, a reference it holds, cleaned of escapes and
        # line ends (before: a key such as "a\x1b[31m" coloured the rest of the message).
        shown = _printable(message)
        lines = [f"{where}: {_printable(key)}: {shown}" if key else f"{where}: {shown}"]
        lines += [e.args[0] for e in self.also[: MAX_REPORTED - 1]]
        if (more := len(self.also) + 1 - MAX_REPORTED) > 0:
            stopped = f" (reading stopped at {MAX_KEPT:,})" if len(self.also) + 1 >= MAX_KEPT else ""
            lines.append(f"and {more:,} more errors{stopped}")
        super().__init__("\n".join(lines))

    @property
    def errors(self) -> tuple[ConfigError, ...]:
        """This error and every other found with it, each alone, in the order they were found."""
        first = self if not self.also else ConfigError(self.message, file=self.file, line=self.line, key=self.key)
        return (first, *self.also)

    def __reduce__(self) -> tuple[Any, ...]:
        """Made again from its own arguments (pickle and `copy` call the class with ``args``, the whole line: before,
        a copy's text said its place twice, ``<config>: tooltree.yaml:3: …``)."""
        return (
            functools.partial(type(self), file=self.file, line=self.line, key=self.key, also=self.also),
            (self.message,),
            self.__dict__,
        )


class _Stop(ConfigError):
    """`Reader.add`'s: the file's errors kept, the reading stopped."""


def joined(errors: Sequence[ConfigError]) -> ConfigError:
    """One `ConfigError` reporting every one of ``errors`` (independent errors of one file, in the order found): the
    first with the others as its ``also``; a single error is itself."""
    if len(errors) == 1:
        return errors[0]
    first, *rest = [one for e in errors for one in e.errors]
    return ConfigError(first.message, file=first.file, line=first.line, key=first.key, also=rest)


def _printable(text: str) -> str:
    """``text`` without control, bidi or zero-width characters, on one line (`tool_tree.text.clean`), and with half a
    character (a JSON key's ``\\ud800``, a file name's byte that is not UTF-8) as its escape: no terminal or log can
    be written one (before, writing such an error as UTF-8 raised UnicodeEncodeError)."""
    if text.isprintable():
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", clean(text).replace("\n", " "))


_VAR = re.compile(
    r"\$(?:(?P<dollar>\$)|\{(?P<scope>env|input):(?P<id>[^{}]*)\}|(?P<slash>\{/\})"
    r"|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<dash>:?-)(?P<default>[^{}]*))?\}|(?P<open>\{)"
    r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)
"""``$$``, ``${VAR}``, ``${VAR:-default}`` or ``${VAR-default}`` (a default holds no brace); else a bare ``${``,
which `Reader.expand` refuses. An editor's variables (``${env:VAR}``, ``${input:id}``, ``${/}``) and a bare
``$VAR`` are read only in the files of clients that write them (`Reader.client`); elsewhere the first are refused
and a bare ``$VAR`` is text."""


_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")

_SURROGATE = re.compile("[\ud800-\udfff]")
"""Half of a character: a UTF-16 surrogate alone, which a JSON or YAML ``\\u`` escape can write and UTF-8 cannot
hold."""


def lone_surrogate(text: str) -> str | None:
    """What is wrong with ``text`` as written in a configuration when it holds half of a character (``"\\ud800"`` in
    JSON or YAML), or None. No program can be given it, nor a file hold it: before, such a server failed to start
    with "bad response: 'utf-8' codec can't encode", a ``cwd`` holding one was a traceback, and a server's name or
    ``description`` was one once its tools were listed."""
    if (m := _SURROGATE.search(text)) is None:
        return None
    return (
        f"holds \\u{ord(m.group()):04x}, half of a character (a lone UTF-16 surrogate), which no program or file can "
        "take; write the whole character (its two \\u escapes, or the character itself)"
    )


def _too_long(tag: str, text: str) -> bool:
    """Whether the YAML number ``text`` of ``tag`` is too long to construct: a whole number of more characters than
    Python reads as digits (4,300), or a sexagesimal one (``1:30:00``) of as many: PyYAML's work on it grows with
    the square of its parts."""
    return len(text) > (sys.get_int_max_str_digits() or 4300) and (tag == _NUMBER_TAGS[0] or ":" in text)


_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?[eE][-+]?[0-9]+")
"""A JSON number with an exponent, which YAML 1.1 reads as a string unless it has a dot and a signed exponent."""


@dataclass(frozen=True)
class ClientVariables:
    """The variables of another client's file that tooltree's own do not have (`tool_tree.config_clients`).

    ``predefined``: the editor's named values (``workspaceFolder``, ``userHome``, …), which win over an environment
    variable of that name. ``inputs``: VS Code's ``inputs`` (the values it asks the user for), each id with its
    description and line; ``${input:id}`` is read from the environment variable `input_variable` names.
    ``bare``: a ``$VAR`` without braces is a variable too (Gemini CLI's files).
    """

    client: str
    predefined: Mapping[str, str]
    inputs: Mapping[str, tuple[str, int | None]] = dataclasses.field(default_factory=dict)
    bare: bool = False


def input_variable(input_id: str) -> str:
    """The environment variable that gives tooltree the value of VS Code's ``${input:input_id}``: the id upper-cased,
    each character other than a letter or digit an underscore (``perplexity-key``:
    ``TOOLTREE_INPUT_PERPLEXITY_KEY``)."""
    return "TOOLTREE_INPUT_" + re.sub(r"[^A-Za-z0-9]", "_", input_id).upper()


LARGEST = sys.float_info.max
"""The largest number of seconds read: a whole number past it is no float (``float(10**400)`` is an OverflowError)."""


class BigNumber(float):
    """A number read as written but past what Python holds as one: a whole number of more digits than it reads
    (``sys.get_int_max_str_digits()``, 4,300: ``int()`` of more is a ValueError, in every format's reader) or one
    past a float's range (``1e400``). Its value is the infinity of its sign, as a JavaScript client reading the
    JSON has it; ``str()`` is the number as written (an ``args`` item) and ``repr()`` that, shortened, for errors
    (before: "invalid YAML: … is not a valid !!int" for a JSON file, or a ValueError traceback)."""

    __slots__ = ("text",)
    text: str

    def __new__(cls, text: str) -> BigNumber:
        number = super().__new__(cls, -math.inf if text.lstrip().startswith("-") else math.inf)
        number.text = text
        return number

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        text = self.text.strip()
        return text if len(text) <= 40 else f"{text[:24]}…{text[-8:]} ({len(text):,} characters)"


def number_read(text: str, value: Any) -> Any:
    """``value``, constructed from the number ``text``, or a `BigNumber` of ``text`` when it is too large to be held
    (an infinity that ``text`` does not spell, as ``.inf`` does) or shown (``str()`` of an int of too many digits)."""
    if isinstance(value, float) and math.isinf(value) and not text.strip().lower().lstrip("+-").endswith("inf"):
        return BigNumber(text)
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 1000:  # no float holds it
        try:
            str(value)  # `0x` and 4,000 digits: held, but more decimal digits than Python shows
        except ValueError:
            return BigNumber(text)
    return value


def too_deep() -> str:
    return f"nested too deep: more than {MAX_DEPTH} levels of mappings and lists (tooltree's settings go 4 deep)"


def _too_many() -> str:
    return f"the file holds more than {MAX_VALUES:,} values once its YAML aliases (*name) are expanded"


@dataclass
class Node:
    """A parsed value with the line it came from (1-based), and for a YAML scalar read as something other than a
    string (a number, a boolean, a date), its ``text`` as written: a string is read as that text (`Reader.string`)."""

    value: Any
    line: int | None
    text: str | None = None


class Reader:
    """Reads composed nodes of the file ``file`` as `Node` values, and those as a configuration's values."""

    def __init__(self, file: str, environ: Mapping[str, str], folder: Path | None = None):
        self.file = file
        self.environ = environ
        self.folder = folder
        self.values = 0  # values read so far (`to_node`), aliases counted each time they are used
        self._unset: list[ConfigError] | None = None  # within `deferring`: the unset variables' errors
        self._verbatim = False  # within `deferring(verbatim=True)`: no variable is looked up
        self.client: ClientVariables | None = None  # another client's file: its variables too
        self._expansion = Expansion(MAX_DEPTH)
        self.json = False  # the nodes are JSON's: a number with an exponent and no dot (`1e5`) is one, as JSON has it
        self.problems: list[ConfigError] = []  # the file's errors found so far, each independent of the others (`kept`)

    @contextlib.contextmanager
    def kept(self) -> Iterator[None]:
        """Within it, a `ConfigError` is kept in `problems` and reading goes on after the block: for a part of the
        file that the rest does not depend on (a server's entry, a section, a top-level key), so that every such
        error is reported at once (before: the first alone, and a user with three mistakes ran three times)."""
        try:
            yield
        except _Stop:
            raise
        except ConfigError as e:
            self.add(e)

    def add(self, error: ConfigError) -> None:
        """Keeps ``error`` in `problems`. Raises: ConfigError: it is the `MAX_KEPT`-th: every one kept, the reading
        stopped."""
        self.problems.append(error)
        if len(self.problems) >= MAX_KEPT:
            kept, self.problems = self.problems, []
            first, *rest = [one for e in kept for one in e.errors]
            raise _Stop(first.message, file=first.file, line=first.line, key=first.key, also=rest)

    @contextlib.contextmanager
    def deferring(self, *, verbatim: bool = False) -> Iterator[list[ConfigError]]:
        """Within it, a variable that is not set is not an error at once: its reference is kept as written and its
        error (file, line and key) added to the list yielded, for the caller to raise when the value is needed.
        With ``verbatim``, no variable is looked up: every string is kept as written (its ``${`` still checked to
        be a reference), for a server that is disabled. Any other problem is raised as outside it.
        """
        unset: list[ConfigError] = []
        self._unset, self._verbatim = unset, verbatim
        try:
            yield unset
        finally:
            self._unset, self._verbatim = None, False

    @property
    def is_deferring(self) -> bool:
        """Whether the reader is within `deferring` (the server read is not one the run uses)."""
        return self._unset is not None

    def error(self, message: str, node: Node | None, key: str | None = None) -> ConfigError:
        return ConfigError(message, file=self.file, line=node.line if node else None, key=key)

    def to_node(self, yn: Any, key: str | None = None, depth: int = 1) -> Node:
        """A composed YAML node as `Node` values, each with its line; ``key`` names it in errors.

        Raises:
            ConfigError: a key that is not a string, a duplicate key, a tag no safe loader knows, a merge
                key (``<<``) that does not name mappings, or more than `MAX_DEPTH` levels or `MAX_VALUES`
                values once aliases are expanded.
        """
        import yaml
        from yaml.constructor import ConstructorError, SafeConstructor

        line = yn.start_mark.line + 1
        self.values += 1
        if self.values > MAX_VALUES:
            # Aliases are expanded here: a few lines of `&a [*b, *b, …]` can stand for billions of values.
            raise self.error(_too_many(), Node(None, line), key)
        if depth > MAX_DEPTH:  # the composer checked the text; aliases nested in aliases go deeper
            raise self.error(too_deep(), Node(None, line), key)
        # Its values counted before they are built (a "billion laughs"); a scalar is one.
        over = (
            None if isinstance(yn, yaml.ScalarNode) else self._expansion.over(yn, key, depth, self.values, MAX_VALUES)
        )
        if over is not None:
            raise self.error(over[2] or _too_many(), Node(None, over[0]), over[1])
        if isinstance(yn, yaml.MappingNode):
            out: dict[str, tuple[Node, Node]] = {}
            merged: dict[str, tuple[Node, Node]] = {}
            for k, v in yn.value:
                if k.tag == "tag:yaml.org,2002:merge":
                    merged = {**self.merge(v, key, depth), **merged}  # the first mapping merged wins
                    continue
                knode = self.to_node(k, key, depth + 1)
                if not isinstance(knode.value, str):
                    quote = quote_hint(knode, self.json)
                    got = kind_of(knode.value) if isinstance(knode.value, dict | list) else repr(knode.value)
                    raise self.error(f"keys must be strings, got {got}{quote}", knode, key)  # `? [a, b]`: a list
                if knode.value in out:  # the first kept, and the rest of the file read
                    self.add(self.error("duplicate key", knode, f"{key}.{knode.value}" if key else knode.value))
                    continue
                out[knode.value] = (knode, self.to_node(v, f"{key}.{knode.value}" if key else knode.value, depth + 1))
            return Node({**merged, **out}, line)  # keys written beside `<<` win
        if isinstance(yn, yaml.SequenceNode):
            items = [self.to_node(v, f"{key}[{i}]" if key else f"[{i}]", depth + 1) for i, v in enumerate(yn.value)]
            return Node(items, line)
        assert isinstance(yn, yaml.ScalarNode)
        if yn.tag == "tag:yaml.org,2002:str":
            if self.json and yn.style is None and _JSON_NUMBER.fullmatch(yn.value):  # `1e5`: a string to YAML
                return Node(number_read(yn.value, float(yn.value)), line)
            return Node(yn.value, line)
        if yn.tag in _NUMBER_TAGS and _too_long(yn.tag, yn.value):  # not constructed: refused, or slow
            return Node(BigNumber(yn.value), line, yn.value)
        # Constructed directly, not re-serialized and loaded: an empty value (`servers:` and nothing
        # after it) has no text of its own, and serializing it alone is not valid YAML.
        try:
            value = SafeConstructor().construct_object(yn, deep=True)
        except ConstructorError as e:
            raise self.error(f"invalid YAML: {e.problem or e}", Node(None, line), key) from None
        except (ValueError, TypeError, KeyError, AttributeError):  # an explicit tag on text it does not fit
            tag = yn.tag.removeprefix("tag:yaml.org,2002:")
            shown = one_line(repr(yn.value), 80)  # a number of 5,000 digits is not shown whole
            raise self.error(f"invalid YAML: {shown} is not a valid !!{tag}", Node(None, line), key) from None
        except OverflowError:  # `1:59:…:59.5`, a float of more parts than a float holds
            return Node(BigNumber(yn.value), line, yn.value)
        return Node(number_read(yn.value, value) if yn.tag in _NUMBER_TAGS else value, line, yn.value)

    def merge(self, yn: Any, key: str | None, depth: int) -> dict[str, tuple[Node, Node]]:
        """The keys a YAML merge key (``<<: *a`` or ``<<: [*a, *b]``) brings in; of a list, the first mapping's win.

        Raises:
            ConfigError: the merge key names something other than a mapping or a list of mappings.
        """
        import yaml

        sources = yn.value if isinstance(yn, yaml.SequenceNode) else [yn]
        merged: dict[str, tuple[Node, Node]] = {}
        for source in sources:
            if not isinstance(source, yaml.MappingNode):
                where = Node(None, source.start_mark.line + 1)
                raise self.error(
                    "a merge key (<<) takes a mapping or a list of mappings, such as <<: *common", where, key
                )
            mapping: dict[str, tuple[Node, Node]] = self.to_node(source, key, depth + 1).value
            merged = {**mapping, **merged}
        return merged

    def expand(self, text: str, node: Node, key: str) -> str:
        """``text`` with ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}`` and ``$$`` replaced (within
        `deferring`, an unset variable's reference, or with ``verbatim`` the whole text, kept as written).

        Raises:
            ConfigError: a variable without a default is not set (outside `deferring`), or a ``${`` is none of
                these forms.
        """

        client = self.client

        def sub(m: re.Match[str]) -> str:
            if m.group("bare") is not None and (client is None or not client.bare):
                return m.group(0)  # `$VAR` is text, but in a Gemini CLI file
            if m.group("open") is not None or (client is None and (m.group("scope") or m.group("slash"))):
                raise self.error(_bad_reference(text, m.start()), node, key)
            if self._verbatim:
                return m.group(0)
            if m.group("dollar") is not None:
                return "$"
            if m.group("slash") is not None:
                return os.sep
            if m.group("scope") == "input":
                return self._input(m.group("id"), m.group(0), node, key)
            name = m.group("name") or m.group("id") or m.group("bare")
            if client is not None and m.group("name") and name in client.predefined:
                return client.predefined[name]
            dash, default = m.group("dash"), m.group("default")
            value = self.environ.get(name)
            if value is not None and not (dash == ":-" and value == ""):
                return value
            if dash is not None:  # `:-` when unset or empty, `-` when unset: as the shell and docker compose
                return default
            shown = m.group(0) if m.group("scope") or m.group("bare") else f"${{{name}}}"
            return self._unset_variable(f"environment variable {shown} is not set", m.group(0), node, key)

        return _VAR.sub(sub, text)

    def _unset_variable(self, problem: str, reference: str, node: Node, key: str) -> str:
        """``reference`` kept as written, its ``problem`` kept for the caller (within `deferring`); else raised."""
        unset = self.error(problem, node, key)
        if self._unset is None:
            raise unset
        self._unset.append(unset)
        return reference

    def _input(self, input_id: str, reference: str, node: Node, key: str) -> str:
        """The value of VS Code's ``${input:input_id}``: the environment variable `input_variable` names."""
        variable = input_variable(input_id)
        if (value := self.environ.get(variable)) is not None:
            return value
        declared = self.client.inputs.get(input_id) if self.client is not None else None
        if declared is None:
            said = 'not declared in "inputs"'
        else:
            description, line = declared
            said = (f"{description!r}, " if description else "") + f'declared in "inputs" at line {line}'
        problem = (
            f"{one_line(reference, 120)} ({one_line(said, 300)}) is a value VS Code asks for when the server starts; "
            f"tooltree cannot ask: set the environment variable {one_line(variable, 120)} to it"
        )
        return self._unset_variable(problem, reference, node, key)

    def string(self, node: Node, key: str, *, expand: bool = True) -> str:
        """A string value; a number is taken as written (YAML 1.1 reads ``010`` as 8, ``12:30`` as 750 and ``1.10``
        as 1.1: before, a server got ``8``, ``750`` or ``1.1`` in its ``args`` or ``env``).

        Raises:
            ConfigError: the value is no string nor number (a boolean, a date, a list, nothing), or holds a variable
                reference `expand` refuses.
        """
        v = node.value
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise self.error(f"expected a string, got {kind_of(v)}{quote_hint(node, self.json)}", node, key)
        text = v if isinstance(v, str) else node.text if node.text is not None else str(v)
        if (half := lone_surrogate(text)) is not None:  # as written: a variable's value may hold one (a byte of it)
            raise self.error(half, node, key)
        return self.expand(text, node, key) if expand else text

    def string_list(self, node: Node, key: str, *, expand: bool = True) -> tuple[str, ...]:
        if not isinstance(node.value, list):
            raise self.error(f"expected a list of strings, got {kind_of(node.value)}", node, key)
        return tuple(self.string(item, f"{key}[{i}]", expand=expand) for i, item in enumerate(node.value))

    def string_map(self, node: Node, key: str, *, variables: bool = False) -> dict[str, str]:
        """A mapping of strings; of ``variables`` (a server's ``env``), a name with no value is refused saying how to
        pass on tooltree's own variable, which docker compose does for it (before: "expected a string, got nothing"),
        and a list (compose's ``- NAME=value``) saying how to write it."""
        if not isinstance(node.value, dict):
            hint = ""
            first = None
            if variables and isinstance(node.value, list):  # docker compose's other form: `- TOKEN=abc`
                first = next((i.value for i in node.value if isinstance(i.value, str) and "=" in i.value), None)
            if first is not None:  # its name alone: a value may be a secret
                name = one_line(first.partition("=")[0].strip(), 60)
                as_key = f'"{name}": "…"' if self.json else f"{name}: …"
                hint = f" of NAME=value: write each as a key of `env`, {as_key}, not {name}=…"
            raise self.error(f"expected a mapping of strings, got {kind_of(node.value)}{hint}", node, key)
        for k, (knode, vnode) in node.value.items():
            if (half := lone_surrogate(k)) is not None:
                raise self.error(half, knode, f"{key}.{k}")
            if variables and vnode.value is None and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
                written = (f'"{k}": "${{{k}}}"', f'"{k}": ""') if self.json else (f'{k}: "${{{k}}}"', f'{k}: ""')
                problem = (
                    f"expected a string, got nothing: a server is given only the variables its `env` sets (and PATH, "
                    f"HOME and a few more); to pass on tooltree's own {k} write {written[0]}, for an empty value "
                    f"{written[1]}"
                )
                raise self.error(problem, vnode, f"{key}.{k}")
        return {k: self.string(v, f"{key}.{k}") for k, (_, v) in node.value.items()}

    def number(self, node: Node, key: str) -> float:
        v = node.value
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= LARGEST:  # before: 10**400 a traceback
            got = one_line(value_shown(v), 80) + ("" if self.json else exponent_hint(v))  # a JSON "1e3" is text
            raise self.error(f"expected a positive number of seconds, got {got}", node, key)
        return float(v)

    def whole(self, node: Node, key: str, *, most: int) -> int:
        """A whole number from 1 to ``most``."""
        v = node.value
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= most:
            raise self.error(f"expected a whole number from 1 to {most:,}, got {value_shown(v)}", node, key)
        return v

    def boolean(self, node: Node, key: str) -> bool:
        if not isinstance(node.value, bool):
            raise self.error(f"expected true or false, got {value_shown(node.value)}", node, key)
        return node.value


def _bad_reference(text: str, at: int) -> str:
    """Why the ``${`` at ``at`` in ``text`` is not a reference `Reader.expand` can replace."""
    rest, depth, end = text[at:], 0, min(len(text) - at, 80)
    for i, c in enumerate(rest[:80]):  # as far as its braces close, if they do soon
        depth += (c == "{") - (c == "}")
        if depth == 0 and c == "}":
            end = i + 1
            break
    shown = rest[:end] + ("…" if len(rest) > end and depth else "")
    forms = "use ${VAR}, ${VAR:-default} or ${VAR-default}, and $$ for a literal $"
    if re.match(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?-[^{}]*\{", rest):
        return f"a default may not hold a brace or another ${{...}}: {shown!r} ({forms})"
    return f"not a variable reference: {shown!r} ({forms})"


def quote_hint(node: Node, json: bool) -> str:
    """For a YAML scalar written without quotes and read as a boolean, a date, null, a mapping or (as a key) a number
    (``off``, ``yes``, ``2024-01-01``, ``~``, ``X-Key: 1``, ``1``), how to make it the text it looks like; else (a
    JSON file's ``true`` is one on purpose) nothing."""
    v = node.value
    if not json and isinstance(v, dict) and len(v) == 1:  # `args: [-H, X-Key: 1]`: the `: ` made a mapping of it
        return ' (YAML reads an unquoted item holding ": " as a mapping: write the item in quotes)'
    if json or not node.text:
        return ""
    if v is None and node.text == "~":  # `cwd: ~`, meaning the home folder (before: "got nothing", and no more)
        return ' (YAML reads an unquoted ~ as null: write "~" for the text, the home folder in `command` and `cwd`)'
    kind = "boolean" if isinstance(v, bool) else "date" if isinstance(v, datetime.date) else ""
    if not kind and isinstance(v, int | float):  # a key (`servers: {1: …}`); where a value is text, one is taken
        kind = "number"
    written = one_line(node.text, 40)
    return f' (YAML reads an unquoted {written} as a {kind}: write "{written}" for the text)' if kind else ""


def exponent_hint(v: Any) -> str:
    """For a number with an exponent that YAML 1.1 read as text (``1e3``: it wants a dot and a signed exponent), how to
    write it as a number; else nothing (before: "expected a positive number of seconds, got '1e3'", no more)."""
    if not isinstance(v, str) or not _JSON_NUMBER.fullmatch(v.strip()) or not math.isfinite(number := float(v)):
        return ""
    if number.is_integer() and abs(number) < 1e16:
        written = str(int(number))
    else:
        mantissa, _, exponent = f"{number:e}".partition("e")
        mantissa = mantissa.rstrip("0")
        written = f"{mantissa}{'0' if mantissa.endswith('.') else ''}e{exponent}"
    return f" (YAML reads {v.strip()} as text, not as a number: write {written})"


def kind_of(v: Any) -> str:
    if v is None:
        return "nothing"
    if isinstance(v, BigNumber):
        return f"the number {v!r}"
    if isinstance(v, dict):
        return "a mapping"
    if isinstance(v, list):
        return "a list"
    return f"{type(v).__name__} {v!r}"


def value_shown(v: Any) -> str:
    """A value as an error shows it: a scalar as written, a mapping or list (or nothing) by its kind."""
    return kind_of(v) if v is None or isinstance(v, dict | list) else repr(v)


def did_you_mean(word: str, options: Any, *, unknown: bool = False) -> str:
    """The option closest to ``word`` as a question, or nothing; beside it (or alone, for an ``unknown`` key), the
    characters of ``word`` no option has that are not ASCII (a zero-width space, a Cyrillic ``о``), which errors show
    cleaned or as they look (before: "command: unknown key (did you mean 'command'?)")."""
    close = difflib.get_close_matches(word, sorted(options), n=1, cutoff=0.6)
    known = {c for option in options for c in option}
    odd = [c for c in dict.fromkeys(word) if not c.isascii() and c not in known]
    note = f"it holds {', '.join(f'U+{ord(c):04X}' for c in odd[:3])}, which is not ASCII" if odd else ""
    if close:
        return f" (did you mean {close[0]!r}?{' ' + note if note else ''})"
    return f" ({note})" if unknown and note else ""
