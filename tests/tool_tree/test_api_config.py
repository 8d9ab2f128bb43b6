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


def test_a_config_printed_shows_no_secret_of_its_servers_env_headers_url_or_args(tmp_path: Path) -> None:
    path = tmp_path / "tooltree.yaml"
    path.write_text(
        "servers:\n"
        "  crm:\n"
        "    command: crm-server\n"
        "    args: [--api-key, sk-args-0123456789, --verbose]\n"
        "    env: {API_KEY: sk-env-0123456789, DEBUG: '1'}\n"
        "  drive:\n"
        "    url: https://me:pw-0123456789@drive.example/mcp?token=q-0123456789\n"
        "    headers: {Authorization: Bearer sk-header-0123456789}\n",
        encoding="utf-8",
    )
    config = load_config(path)
    shown = f"{config!r} {config} {config.servers} {config.server('drive')!r}"
    for secret in ("sk-args-0123456789", "sk-env-0123456789", "pw-0123456789", "q-0123456789", "sk-header-0123456789"):
        assert secret not in shown
    assert "env={'API_KEY': '[redacted API_KEY]', 'DEBUG': '[redacted DEBUG]'}" in shown  # the keys stay, to debug
    assert "headers={'Authorization': '[redacted header Authorization]'}" in shown
    assert "args=('--api-key', '[redacted arg --api-key]', '--verbose')" in shown
    assert "url='https://me:[redacted url password]@drive.example/mcp?token=[redacted url query token]'" in shown
    assert config.server("crm").env["API_KEY"] == "sk-env-0123456789"  # the values themselves are unchanged
