"""An ACP client for the tests of `cordis acp`, built on the official Python
SDK (`agent-client-protocol`), which parses every message the agent sends
into its typed models: an update of the wrong shape never reaches the
transcript.

    python client.py SCENARIO.json

SCENARIO is `{"command": [argv...], "cwd": DIR, "env": {NAME: VALUE},
"permission": ANSWER, "steps": [...]}` (`env` is added to the few
variables the SDK passes on); each step is one of

    {"op": "initialize", "version": N}
    {"op": "new", "cwd": DIR, "mcpServers": [...]}      -> the session id is kept
    {"op": "prompt", "text": T, "cancelAfterMs": N?}    -> the kept session
    {"op": "prompt2", "text": T}                        -> two prompts at once
    {"op": "load", "session": ID?, "cwd": DIR}          -> ID or the kept session
    {"op": "resume", "session": ID?, "cwd": DIR}
    {"op": "list"}
    {"op": "close"}
    {"op": "raw", "method": M, "params": P}             -> any request

ANSWER is how permission requests are answered: an option id
(`allow-once`, `reject-always`, ...), or `cancel` (send session/cancel
and answer `cancelled`, as the protocol asks of a client).

Prints one JSON object: {"records": [...]} in the order things happened;
each record is {"kind": "update" | "response" | "error" | "permission",
"op", "ms" (since the step started), ...}.
"""

import asyncio
import json
import os
import sys
import time

import acp
from acp import RequestError, text_block
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse


class Recorder:
    def __init__(self, permission):
        self.records = []
        self.permission = permission
        self.conn = None
        self.started = time.monotonic()

    def ms(self):
        return round((time.monotonic() - self.started) * 1000, 1)

    def add(self, kind, **fields):
        self.records.append({"kind": kind, "ms": self.ms(), **fields})

    def on_connect(self, conn):
        self.conn = conn

    async def session_update(self, session_id, update, **kwargs):
        self.add("update", sessionId=session_id, update=update.model_dump(by_alias=True, exclude_none=True, mode="json"))

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.add(
            "permission",
            sessionId=session_id,
            toolCall=tool_call.model_dump(by_alias=True, exclude_none=True, mode="json"),
            options=[o.model_dump(by_alias=True, exclude_none=True, mode="json") for o in options],
        )
        if self.permission == "cancel":
            await self.conn.cancel(session_id=session_id)
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        if self.permission == "hold":
            # Never answered: the agent must stop waiting on a cancel.
            await asyncio.sleep(3600)
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=self.permission))


def dump(result):
    if result is None:
        return None
    if hasattr(result, "model_dump"):
        return result.model_dump(by_alias=True, exclude_none=True, mode="json")
    return result


async def main(scenario):
    rec = Recorder(scenario.get("permission", "allow-once"))
    command = scenario["command"]
    session = None
    # The SDK passes the agent a few variables only: keep the test run's
    # record of checked plugin layouts (CORDIS_CACHE_DIR) in target/.
    env = {k: v for k, v in os.environ.items() if k == "CORDIS_CACHE_DIR"}
    env.update(scenario.get("env") or {})
    async with acp.spawn_agent_process(lambda conn: rec, command[0], *command[1:], cwd=scenario.get("cwd"), env=env or None) as (conn, process):
        rec.conn = conn

        async def step(op, call):
            rec.started = time.monotonic()
            try:
                result = await call
                rec.add("response", op=op, result=dump(result))
                return result
            except RequestError as e:
                rec.add("error", op=op, code=e.code, message=str(e), data=e.data)
                return None

        for s in scenario["steps"]:
            op = s["op"]
            if op == "initialize":
                await step(op, conn.initialize(protocol_version=s.get("version", 1)))
            elif op == "new":
                r = await step(op, conn.new_session(cwd=s["cwd"], mcp_servers=s.get("mcpServers", [])))
                if r is not None:
                    session = r.session_id
            elif op == "prompt":
                sid = s.get("session", session)
                call = conn.prompt(session_id=sid, prompt=[text_block(s["text"])])
                if "cancelAfterMs" in s:
                    task = asyncio.ensure_future(step(op, call))
                    await asyncio.sleep(s["cancelAfterMs"] / 1000)
                    rec.add("cancel", sessionId=sid)
                    await conn.cancel(session_id=sid)
                    await task
                else:
                    await step(op, call)
            elif op == "prompt2":
                a = step("prompt", conn.prompt(session_id=session, prompt=[text_block(s["text"])]))
                b = step("prompt", conn.prompt(session_id=session, prompt=[text_block(s["text"])]))
                await asyncio.gather(a, b)
            elif op == "load":
                await step(op, conn.load_session(cwd=s["cwd"], session_id=s.get("session", session), mcp_servers=s.get("mcpServers", [])))
            elif op == "resume":
                await step(op, conn.resume_session(cwd=s["cwd"], session_id=s.get("session", session)))
            elif op == "list":
                await step(op, conn.list_sessions())
            elif op == "close":
                await step(op, conn.close_session(session_id=session))
            elif op == "raw":
                await step(op, conn._conn.send_request(s["method"], s.get("params")))
            else:
                raise SystemExit(f"unknown op {op}")
        rec.add("session", sessionId=session)
    print(json.dumps({"records": rec.records}))


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        asyncio.run(main(json.load(f)))
