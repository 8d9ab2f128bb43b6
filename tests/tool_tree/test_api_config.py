"""`load_config` and `parse_config` given the wrong kind of argument: a TypeError naming it, before any file is
read (they were pathlib's "expected str, bytes or os.PathLike object, not NoneType", or "'int' object is not
iterable" for ``environ``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tool_tree.config import load_config, parse_config


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda p: load_config(None), r"^path: expected the configuration file's path \(str or Path\), got NoneType$"),
        (lambda p: load_config(3), r"^path: expected the configuration file's path \(str or Path\), got int$"),
        (lambda p: load_config(str(p).encode()), r"^path: expected .*, got bytes$"),
        (lambda p: load_config(p, environ=5), r"^environ: expected a mapping of variable names to values, got int$"),
        (lambda p: parse_config(b"servers: {}\n"), r"^text: expected the configuration's text as a str, got bytes$"),
        (lambda p: parse_config("servers: {}\n", environ=["A=1"]), r"^environ: expected a mapping .*, got list$"),
        (lambda p: load_config(p).server(3), r"^name: expected a server's name \(str\), got int 3$"),
        (lambda p: load_config(p).server(b"crm"), r"^name: expected a server's name \(str\), got bytes b'crm'$"),
    ],
)
def test_a_wrong_kind_of_argument_is_a_type_error_naming_it(tmp_path: Path, call: Any, message: str) -> None:
    path = tmp_path / "tooltree.yaml"
    path.write_text("servers: {}\n", encoding="utf-8")
    with pytest.raises(TypeError, match=message):
        call(path)
    assert load_config(path, environ={}).servers == ()  # the right kind is read
