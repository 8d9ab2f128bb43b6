"""Helpers shared by the sample servers: the command line, wire names, and ids.

Every sample server is one script::

    python examples/sample_servers/crm.py                        # stdio
    python examples/sample_servers/crm.py --http --port 8765     # Streamable HTTP at http://127.0.0.1:8765/mcp
"""

from __future__ import annotations

import argparse
import functools
import inspect
import random
import string
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, TypeVar

import anyio
from mcp.server.mcpserver import MCPServer
from pydantic import Field

R = TypeVar("R")

_ID_ALPHABET = string.ascii_lowercase + string.digits
_SF_ALPHABET = string.ascii_letters + string.digits


def serve(server: MCPServer[Any], argv: Sequence[str] | None = None) -> None:
    """Run ``server`` over stdio, or over Streamable HTTP with ``--http``.

    Raises:
        SystemExit: on bad command-line arguments (argparse).
    """
    parser = argparse.ArgumentParser(description=server.description or server.name)
    parser.add_argument("--http", action="store_true", help="serve Streamable HTTP at /mcp instead of stdio")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind with --http (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port to bind with --http (default 8765)")
    args = parser.parse_args(argv)
    if args.http:
        anyio.run(functools.partial(server.run_streamable_http_async, host=args.host, port=args.port))
    else:
        server.run()


def wire_names(**names: str) -> Callable[[Callable[..., Awaitable[R]]], Callable[..., Awaitable[R]]]:
    """Publish some parameters of an async tool function under wire names that are not identifiers.

    ``@wire_names(sender="from", reply_to="reply-to")`` makes the input schema say ``from`` and
    ``reply-to``. The SDK calls a tool with its wire names as keywords, so the returned wrapper
    maps them back to the Python names before calling the function.

    Raises:
        TypeError: a name given is not a parameter of the decorated function.
    """

    def decorate(fn: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]:
        signature = inspect.signature(fn, eval_str=True)
        unknown = set(names) - set(signature.parameters)
        if unknown:
            raise TypeError(f"{fn.__name__} has no parameter(s) {sorted(unknown)}")
        params = [
            p.replace(annotation=Annotated[p.annotation, Field(alias=names[p.name])]) if p.name in names else p
            for p in signature.parameters.values()
        ]
        to_python = {wire: py for py, wire in names.items()}

        @functools.wraps(fn)
        async def wrapper(**kwargs: Any) -> R:
            return await fn(**{to_python.get(key, key): value for key, value in kwargs.items()})

        wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        return wrapper

    return decorate


def short_id(rng: random.Random, prefix: str, length: int = 6) -> str:
    """An id like ``doc_k3x9qa``: ``prefix`` plus ``length`` lowercase letters and digits."""
    return prefix + "".join(rng.choices(_ID_ALPHABET, k=length))


def salesforce_id(rng: random.Random, key_prefix: str) -> str:
    """A 15-character id in the Salesforce shape: a 3-character key prefix, ``5e000``, 7 random characters."""
    return key_prefix + "5e000" + "".join(rng.choices(_SF_ALPHABET, k=7))
