"""An MCP client for the tests of `cordis mcp` (tests/mcp.rs) and for its
throughput figure (bench/mcp.sh), on the official Python SDK (`mcp`).

    client.py scenario stdio CORDIS [ARGS...]   run the scenario over stdio
    client.py scenario http URL [TOKEN]         run the scenario over HTTP
    client.py kill CORDIS [ARGS...]             call todo_write until killed, one line per answer
    client.py bench N CORDIS [ARGS...]          N sequential todo_write calls over stdio
    client.py bench-tool N TOOL ARGS CMD...     N sequential calls of TOOL on the stdio server CMD
    client.py watch FILE CORDIS [ARGS...]       rewrite the composition FILE, wait for tools/list_changed
    client.py halfsave FILE GAP WAIT CORDIS [ARGS...]  write FILE in place in two parts GAP seconds apart,
                                                  then watch WAIT seconds
    client.py errors stdio CORDIS [ARGS...]     protocol errors and a cancelled call, over stdio
    client.py errors http URL                   the same over HTTP

`CORDIS [ARGS...]` is the command that starts the server (`cordis mcp ...`).
Output: one JSON object per line on stdout.
"""

import asyncio
import json
import os
import sys
import time
import warnings

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


# The scenario subscribes with resources/subscribe, the handshake versions'
# way (the server serves those versions); the SDK warns that 2026-07-28
# replaced it.
warnings.filterwarnings("ignore", message=".*removed as of 2026-07-28.*")


def out(**fields):
    print(json.dumps(fields), flush=True)


def stdio_server(argv):
    # The SDK passes the server a few variables only: keep the test run's
    # record of checked plugin layouts (CORDIS_CACHE_DIR) in target/.
    env = {k: v for k, v in os.environ.items() if k == "CORDIS_CACHE_DIR"}
    return StdioServerParameters(command=argv[0], args=argv[1:], env=env or None)


async def scenario(server):
    updates = []
    updated = asyncio.Event()

    async def on_message(message):
        if getattr(message, "method", None) == "notifications/resources/updated":
            updates.append(str(message.params.uri))
            updated.set()

    async with Client(server, message_handler=on_message) as client:
        tools = await client.list_tools()
        todo = next(t for t in tools.tools if t.name == "todo_write")
        out(step="tools", protocol=client.protocol_version, names=[t.name for t in tools.tools],
            description=todo.description, input_schema=todo.input_schema,
            output_schema=todo.output_schema)
        resources = await client.list_resources()
        uri = str(next(r.uri for r in resources.resources if str(r.uri).endswith("/todos")))
        out(step="resources", uris=[str(r.uri) for r in resources.resources])
        await client.subscribe_resource(uri)

        valid = {"todos": [
            {"content": "read the parser", "status": "completed"},
            {"content": "fix the bug", "status": "in_progress"},
            {"content": "add a test", "status": "pending"},
            {"content": "ship it", "status": "pending"},
        ]}
        result = await client.call_tool("todo_write", valid)
        try:
            await asyncio.wait_for(updated.wait(), 10)
        except asyncio.TimeoutError:
            pass
        out(step="valid", is_error=result.is_error, text=result.content[0].text,
            structured=result.structured_content, updates=list(updates))

        updated.clear()
        before = len(updates)
        invalid = {"todos": [{"content": "fine", "status": "pending"}, {"content": "bad", "status": "later"}]}
        result = await client.call_tool("todo_write", invalid)
        out(step="invalid", is_error=result.is_error, text=result.content[0].text,
            structured=result.structured_content, updates=updates[before:])

        result = await client.call_tool("todo_write", {"todos": "not a list"})
        out(step="invalid2", is_error=result.is_error, text=result.content[0].text)

        read = await client.read_resource(uri)
        out(step="read", uri=uri, contents=[{"mime": c.mime_type, "text": c.text} for c in read.contents])

        result = await client.call_tool("todo_write", {"todos": [{"content": "ship it", "status": "completed"}]})
        try:
            await asyncio.wait_for(updated.wait(), 10)
        except asyncio.TimeoutError:
            pass
        out(step="second", is_error=result.is_error, structured=result.structured_content, updates=list(updates))


async def kill(argv):
    async with Client(stdio_server(argv)) as client:
        resources = await client.list_resources()
        uri = str(next(r.uri for r in resources.resources if str(r.uri).endswith("/todos")))
        out(step="ready", uri=uri)
        n = 0
        while True:
            content = f"call {n}"
            result = await client.call_tool("todo_write", {"todos": [{"content": content, "status": "in_progress"}]})
            out(step="ack", n=n, content=content, is_error=result.is_error)
            n += 1


async def watch(composition, argv):
    changed = asyncio.Event()

    async def on_message(message):
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            changed.set()

    async with Client(stdio_server(argv), message_handler=on_message) as client:
        before = (await client.list_tools()).tools
        out(step="before", descriptions=[t.description for t in before])
        with open(composition) as f:
            text = f.read()
        with open(composition + ".new", "w") as f:
            f.write(text.replace("allowParallelInProgress: false", "allowParallelInProgress: true"))
        import os
        os.replace(composition + ".new", composition)
        try:
            await asyncio.wait_for(changed.wait(), 20)
            notified = True
        except asyncio.TimeoutError:
            notified = False
        after = (await client.list_tools()).tools
        out(step="after", notified=notified, descriptions=[t.description for t in after])


async def halfsave(composition, gap, settle_wait, argv):
    """Writes the composition in place in two parts, `gap` seconds apart, as
    an editor that writes in place does: the first part still parses and
    leaves the `todo` row out. Reports how many `tools/list_changed`
    notifications came, whether `todo_write` was ever missing from
    `tools/list`, and the final descriptions."""
    notifications = 0

    async def on_message(message):
        nonlocal notifications
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            notifications += 1

    async def names(client):
        return [t.name for t in (await client.list_tools()).tools]

    async with Client(stdio_server(argv), message_handler=on_message) as client:
        before = await names(client)
        with open(composition) as f:
            final = f.read().replace("allowParallelInProgress: false", "allowParallelInProgress: true")
        cut = final.index("- id: todo")
        missing = False
        polling = True

        async def poll():
            # Beside the writes, not between them: a slow answer must not
            # stretch the gap between the two parts.
            nonlocal missing
            while polling:
                missing = missing or "todo_write" not in await names(client)
                await asyncio.sleep(0.02)

        poller = asyncio.create_task(poll())
        with open(composition, "r+") as f:
            f.seek(0)
            f.truncate()
            f.write(final[:cut])
            f.flush()
            first = time.monotonic()
            await asyncio.sleep(gap)
            f.write(final[cut:])
            f.flush()
            written_gap = time.monotonic() - first
        # Long enough for the settle time and the reload after it.
        await asyncio.sleep(settle_wait)
        polling = False
        await poller
        after = (await client.list_tools()).tools
        out(step="halfsave", before=before, notifications=notifications, missing=missing, gap=written_gap,
            descriptions=[t.description for t in after])


async def protocol_errors(server):
    """What the SDK can send of issue 26's inputs: an unknown tool, a
    missing status, and a large call cancelled before the next one."""
    from mcp.shared.exceptions import MCPError

    async with Client(server) as client:
        try:
            await client.call_tool("nope", {})
            out(step="unknown", raised=False)
        except MCPError as e:
            out(step="unknown", raised=True, code=e.code, message=e.message)
        result = await client.call_tool("todo_write", {"todos": [{"content": "a"}]})
        out(step="missing", is_error=result.is_error, text=result.content[0].text)

        big = {"todos": [{"content": f"step {i} of a long plan", "status": "pending"} for i in range(2000)]}
        task = asyncio.ensure_future(client.call_tool("todo_write", big))
        await asyncio.sleep(0.005)
        task.cancel()
        try:
            await task
            cancelled = False
        except asyncio.CancelledError:
            cancelled = True
        result = await client.call_tool("todo_write", {"todos": [{"content": "the one plan", "status": "pending"}]})
        resources = await client.list_resources()
        uri = str(next(r.uri for r in resources.resources if str(r.uri).endswith("/todos")))
        # Whatever the cancelled call did is done before the next one ran:
        # the plan is the last call's, now and a moment later.
        first = json.loads((await client.read_resource(uri)).contents[0].text)
        await asyncio.sleep(1.5)
        later = json.loads((await client.read_resource(uri)).contents[0].text)
        out(step="cancel", cancelled=cancelled, is_error=result.is_error, plan=len(first), later=len(later))


async def bench(n, argv):
    async with Client(stdio_server(argv)) as client:
        await client.list_tools()
        todos = [{"content": f"step {i}", "status": "pending"} for i in range(5)]
        # One call first: the tool compiles its schema on first use.
        await client.call_tool("todo_write", {"todos": todos})
        start = time.perf_counter()
        errors = 0
        for _ in range(n):
            result = await client.call_tool("todo_write", {"todos": todos})
            errors += bool(result.is_error)
        elapsed = time.perf_counter() - start
        out(step="bench", calls=n, seconds=elapsed, calls_per_s=n / elapsed, errors=errors)


async def bench_tool(n, tool, arguments, argv):
    """N sequential calls of TOOL (ARGUMENTS as JSON) on the stdio server
    started as ARGV: the baseline of bench/mcp_client.sh."""
    async with Client(stdio_server(argv)) as client:
        await client.list_tools()
        await client.call_tool(tool, arguments)
        start = time.perf_counter()
        errors = 0
        for _ in range(n):
            result = await client.call_tool(tool, arguments)
            errors += bool(result.is_error)
        elapsed = time.perf_counter() - start
        out(calls=n, seconds=elapsed, calls_per_s=n / elapsed, errors=errors)


def main():
    mode = sys.argv[1]
    if mode == "scenario" and sys.argv[2] == "stdio":
        asyncio.run(scenario(stdio_server(sys.argv[3:])))
    elif mode == "scenario" and sys.argv[2] == "http":
        url = sys.argv[3]
        token = sys.argv[4] if len(sys.argv) > 4 else None
        import httpx2
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        http = httpx2.AsyncClient(headers=headers, timeout=30)
        asyncio.run(scenario(streamable_http_client(url, http_client=http)))
    elif mode == "kill":
        asyncio.run(kill(sys.argv[2:]))
    elif mode == "watch":
        asyncio.run(watch(sys.argv[2], sys.argv[3:]))
    elif mode == "errors" and sys.argv[2] == "stdio":
        asyncio.run(protocol_errors(stdio_server(sys.argv[3:])))
    elif mode == "errors" and sys.argv[2] == "http":
        asyncio.run(protocol_errors(streamable_http_client(sys.argv[3])))
    elif mode == "halfsave":
        asyncio.run(halfsave(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5:]))
    elif mode == "bench":
        asyncio.run(bench(int(sys.argv[2]), sys.argv[3:]))
    elif mode == "bench-tool":
        asyncio.run(bench_tool(int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]), sys.argv[5:]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
