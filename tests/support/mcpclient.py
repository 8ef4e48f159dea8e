"""The MCP server as an agent meets it: ``monte mcp`` a real subprocess, driven by the MCP SDK's
own client over stdio (:func:`session`). Every result's text is kept (``Session.texts``) so a
test can check, afterwards, that none of it holds a sealed item."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

#: the most bytes a tool result may take on the wire (issue 49)
LIMIT = 8192


@dataclass
class Reply:
    error: bool
    doc: dict[str, Any]
    wire: int  # the result's bytes as JSON-RPC carries it
    progress: list[tuple[float, float | None]]


@dataclass
class Session:
    client: ClientSession
    texts: list[str] = field(default_factory=list)

    async def tools(self) -> list[dict[str, Any]]:
        listed = await self.client.list_tools()
        return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]

    async def call(self, name: str, /, **arguments: Any) -> Reply:
        seen: list[tuple[float, float | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total))

        res = await self.client.call_tool(name, arguments, progress_callback=on_progress)
        text = "".join(getattr(c, "text", "") for c in res.content)
        self.texts.append(text)
        doc = res.structured_content if res.structured_content is not None else json.loads(text)
        assert json.loads(text) == doc  # the text block is the structured result, for text-only clients
        wire = len(res.model_dump_json(by_alias=True, exclude_none=True).encode())
        return Reply(bool(res.is_error), doc, wire, seen)


@asynccontextmanager
async def session(repo: Path, *flags: str) -> AsyncIterator[Session]:
    """``monte mcp FLAGS`` started in ``repo`` (this test's environment: its HOME, pinned git),
    initialized; closed (the server's stdin shut) on the way out."""
    params = StdioServerParameters(
        command=sys.executable, args=["-c", "from monte.cli.main import main; main()", "mcp", *flags],
        cwd=str(repo), env={**os.environ, "OMP_NUM_THREADS": "1"})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        yield Session(client)
