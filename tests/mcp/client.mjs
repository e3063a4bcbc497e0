// An MCP client for the tests of `cordis mcp` (tests/mcp.rs), on the
// official TypeScript SDK (@modelcontextprotocol/sdk), over stdio.
//
//   node client.mjs CORDIS [ARGS...]
//
// Starts the server with CORDIS ARGS (`cordis mcp ...`), runs the same
// scenario as client.py, and prints one JSON object per line. The test copies
// this file next to the installed node_modules, so the SDK resolves.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const out = (fields) => process.stdout.write(JSON.stringify(fields) + "\n");

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "cordis-test-ts", version: "1.0.0" });

const updates = [];
let wake = null;
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
  updates.push(n.params.uri);
  if (wake) wake();
});
const nextUpdate = (count) =>
  new Promise((resolve) => {
    if (updates.length >= count) return resolve();
    const timer = setTimeout(resolve, 10000);
    wake = () => {
      if (updates.length >= count) {
        clearTimeout(timer);
        resolve();
      }
    };
  });

await client.connect(transport);
const tools = await client.listTools();
const todo = tools.tools.find((t) => t.name === "todo_write");
out({ step: "tools", server: client.getServerVersion()?.name ?? null, names: tools.tools.map((t) => t.name),
      description: todo.description, input_schema: todo.inputSchema, output_schema: todo.outputSchema ?? null });

const resources = await client.listResources();
const uri = resources.resources.map((r) => r.uri).find((u) => u.endsWith("/todos"));
out({ step: "resources", uris: resources.resources.map((r) => r.uri) });
await client.subscribeResource({ uri });

const valid = { todos: [
  { content: "read the parser", status: "completed" },
  { content: "fix the bug", status: "in_progress" },
  { content: "add a test", status: "pending" },
  { content: "ship it", status: "pending" },
] };
let result = await client.callTool({ name: "todo_write", arguments: valid });
await nextUpdate(1);
out({ step: "valid", is_error: result.isError ?? false, text: result.content[0].text,
      structured: result.structuredContent ?? null, updates: [...updates] });

const before = updates.length;
result = await client.callTool({ name: "todo_write", arguments: { todos: [
  { content: "fine", status: "pending" }, { content: "bad", status: "later" } ] } });
out({ step: "invalid", is_error: result.isError ?? false, text: result.content[0].text,
      structured: result.structuredContent ?? null, updates: updates.slice(before) });

result = await client.callTool({ name: "todo_write", arguments: { todos: "not a list" } });
out({ step: "invalid2", is_error: result.isError ?? false, text: result.content[0].text });

const read = await client.readResource({ uri });
out({ step: "read", uri, contents: read.contents.map((c) => ({ mime: c.mimeType ?? null, text: c.text })) });

result = await client.callTool({ name: "todo_write", arguments: { todos: [{ content: "ship it", status: "completed" }] } });
await nextUpdate(2);
out({ step: "second", is_error: result.isError ?? false, structured: result.structuredContent ?? null, updates: [...updates] });

await client.close();
