"""``monte mcp``: the tool catalog (:mod:`monte.mcp.tools`) served over stdio with the MCP
Python SDK's low-level server, so the tool list, schemas and annotations are exactly ours.

A tool runs in a worker thread (the api is synchronous; the event loop keeps answering, and
progress notifications go out from the loop). Every outcome is a tool result, never a crashed
session: a refusal is ``isError`` with ``{"error": {code, message, fix}}`` as its structured
content, and anything unexpected is reported the same way as ``E_INTERNAL``. A cancelled long
call stops the run it started as ``monte stop`` does (its row recorded ``abandoned``), then lets
the worker end at its next progress report."""

from __future__ import annotations

import functools
import os
import traceback
from typing import Any

from monte import __version__
from monte.errors import MonteError, error
from monte.mcp.paging import dumps
from monte.mcp.tools import TOOLS, Call, Tool, served, switched_off

INSTRUCTIONS = (
    "monte keeps the record of this repository's post-training loop. Read `status` first: it leads with "
    "the best paired dev delta and its verdict, the floor and the test reads left. `train` a chunk, `eval` it "
    "on dev, read `flips` to see which items changed, then decide. Results are paged (cursor). A refusal "
    "comes back as {error: {code, message, fix}}; do what fix says. The sealed test split is read only "
    "by `test_baseline` and `claim`, when this server allows them."
)


def refusal(e: MonteError) -> dict[str, Any]:
    return {"error": {"code": e.code, "message": e.message, "fix": e.fix}}


def run_tool(tool: Tool, arguments: dict[str, Any], call: Call) -> tuple[dict[str, Any], bool]:
    """``tool`` on ``arguments`` (validated against its schema first): (result, is_error)."""
    import jsonschema

    try:
        jsonschema.validate(arguments, tool.input_schema())
    except jsonschema.ValidationError as e:
        return refusal(error("E_USAGE", f"{tool.name}: {e.message}", f"see the {tool.name} tool's input schema")), True
    try:
        return tool.handler(arguments, call), False
    except MonteError as e:
        return refusal(e), True
    except KeyboardInterrupt:
        return refusal(error("E_INTERRUPTED", "interrupted", "call the tool again")), True
    except Exception as e:  # noqa: BLE001 - a bug must not end the session
        traceback.print_exc()  # to stderr: the server's log
        return refusal(error("E_INTERNAL", f"{type(e).__name__}: {e}", "report it (the server's stderr has the "
                                                                             "traceback)")), True


def build(*, read_only: bool = False, allow_test: bool = False) -> Any:
    """The low-level MCP server for this repository (the cwd)."""
    import anyio
    import anyio.to_thread
    import mcp_types as types
    from mcp.server import Server

    tools = {t.name: t for t in served(read_only=read_only, allow_test=allow_test)}
    every = {t.name: t for t in TOOLS}

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[
            types.Tool(name=t.name, title=t.annotations()["title"], description=t.description,
                       input_schema=t.input_schema(),
                       annotations=types.ToolAnnotations(
                           title=t.annotations()["title"], read_only_hint=t.kind == "read",
                           destructive_hint=t.kind == "test", idempotent_hint=t.kind == "read",
                           open_world_hint=False))
            for t in tools.values()])

    def result(doc: dict[str, Any], is_error: bool) -> Any:
        return types.CallToolResult(content=[types.TextContent(type="text", text=dumps(doc))],
                                    structured_content=doc, is_error=is_error)

    async def call_tool(ctx: Any, params: Any) -> Any:
        name, arguments = params.name, dict(params.arguments or {})
        tool = tools.get(name)
        if tool is None:
            if name in every:
                e = switched_off(every[name], read_only=read_only, allow_test=allow_test)
                assert isinstance(e, MonteError)
                return result(refusal(e), True)
            return result(refusal(error("E_NOT_FOUND", f"no tool {name!r}", "list the tools (tools/list)")), True)

        def progress(done: int, total: int) -> None:  # in the worker: the notification goes out from the loop
            anyio.from_thread.run(functools.partial(ctx.session.report_progress, done, total, f"{name}: {done}/{total}"))

        call = Call(progress if tool.long else None)
        try:
            # a long call is let go of when cancelled (its worker runs on to its next progress
            # report); a short one is waited for: it ends soon and leaves nothing half done
            doc, is_error = await anyio.to_thread.run_sync(run_tool, tool, arguments, call,
                                                           abandon_on_cancel=tool.long)
        except anyio.get_cancelled_exc_class():
            call.cancelled = True
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(_stop, call)
            raise
        return result(doc, is_error)

    return Server("monte", version=__version__, instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def _stop(call: Call) -> None:
    """A cancelled call's run, recorded abandoned as ``monte stop`` records it (this process is
    not signalled: its worker raises at its next progress report)."""
    if call.run is None:
        return
    from monte import api

    exp, run = call.run
    try:
        api.stop(ref=run, experiment=exp, reason="cancelled by the MCP client")
    except MonteError:  # it ended meanwhile: its own record stands
        pass


def serve(*, read_only: bool = False, allow_test: bool = False) -> None:
    """Serve over this process's stdin and stdout until the client closes them."""
    import anyio
    from mcp.server.stdio import stdio_server

    from monte.workspace import open_workspace

    open_workspace(require_data_root=False)  # outside a monte repository: refused before serving
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    server = build(read_only=read_only, allow_test=allow_test)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
