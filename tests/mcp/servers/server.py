"""An MCP server on the official Python SDK (`MCPServer`), for the tests
of `mcp-client`, which start it over stdio.

Tools: `echo` (text), `add` (a structured result with its output schema),
`read_note` (a file under the server's working folder: proves `cwd`),
`env` (whether a variable is set: proves `env` and the scrubbing of
credential-shaped names), and `sleep` (lets a test wait inside a turn).
"""

import os
import time

from pydantic import BaseModel

from mcp.server.mcpserver import MCPServer

server = MCPServer("python-peer")


class Sum(BaseModel):
    """The sum of two integers."""

    sum: int


@server.tool()
def echo(text: str) -> str:
    """Returns the text it is given."""
    return text


@server.tool()
def add(a: int, b: int) -> Sum:
    """Adds two integers."""
    return Sum(sum=a + b)


@server.tool()
def read_note(name: str) -> str:
    """Reads a file in the server's working folder."""
    with open(os.path.join(os.getcwd(), name), encoding="utf-8") as f:
        return f.read()


@server.tool()
def env(name: str) -> str:
    """Says whether an environment variable is set, and its value unless it looks secret."""
    value = os.environ.get(name)
    return "unset" if value is None else f"set: {value}"


@server.tool()
def sleep(ms: int) -> str:
    """Waits, then says so."""
    time.sleep(ms / 1000)
    return f"slept {ms} ms"


if __name__ == "__main__":
    server.run()
