"""tooltree core: configuration, MCP server connections, the tree format, tool search.

Importing this package is cheap: submodules that pull in the MCP SDK load on first use.
"""

from __future__ import annotations

__version__ = "0.1.0"
