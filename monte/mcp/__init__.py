"""``monte mcp``: the driving agent's own door, a Model Context Protocol server over stdio.

:mod:`~monte.mcp.tools` is the catalog (each tool a JSON-schema input and one :mod:`monte.api`
call; read, write and sealed-test kinds), :mod:`~monte.mcp.paging` sizes results for a context
window, :mod:`~monte.mcp.server` serves them with the MCP SDK (``pip install 'monte[mcp]'``).
docs/agents.md is the user's account.
"""

from __future__ import annotations
