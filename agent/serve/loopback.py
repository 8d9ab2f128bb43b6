"""What counts as this machine alone: the loopback addresses (``--host`` of ``serve --http``, the host of an
``http://`` URL a server's elicitation may open)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address, or a name) is this machine alone: ``localhost``, any of 127.0.0.0/8, or ``::1``
    (before, only 127.0.0.1 of 127.0.0.0/8 was, as in the MCP SDK's list)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
