// An MCP server on the official TypeScript SDK (its low-level `Server`, so
// it can misbehave on purpose), for the tests of `mcp-client`, over stdio.
//
// Tools:
//   echo        {text}  -> the text
//   mixed       {}      -> text, an image, a resource link, audio, an unknown block
//   lie         {}      -> structuredContent that breaks its declared outputSchema
//   fail        {}      -> isError: true
//   hang        {}      -> never answers; writes the cancellation it receives
//                          to $PEER_LOG (one line per event)
//   crash       {}      -> exits at once (status 3), without answering
//   grow        {}      -> adds the tool `grown` and sends tools/list_changed
//   pid         {}      -> the server's process id
import { appendFileSync } from "node:fs";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const log = (line) => { if (process.env.PEER_LOG) appendFileSync(process.env.PEER_LOG, line + "\n"); };
const empty = { type: "object", properties: {} };
const tools = [
  { name: "echo", description: "Returns the text it is given.", inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] } },
  { name: "mixed", description: "Answers with every kind of content.", inputSchema: empty },
  {
    name: "lie", description: "Answers a value its schema does not allow.", inputSchema: empty,
    outputSchema: { type: "object", properties: { count: { type: "integer" } }, required: ["count"] },
  },
  { name: "fail", description: "Fails.", inputSchema: empty },
  { name: "hang", description: "Never answers.", inputSchema: empty },
  { name: "crash", description: "Exits without answering.", inputSchema: empty },
  { name: "grow", description: "Adds a tool.", inputSchema: empty },
  { name: "pid", description: "The server's process id.", inputSchema: empty },
];

const server = new Server({ name: "typescript-peer", version: "1.0.0" }, { capabilities: { tools: { listChanged: true } } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
  const { name, arguments: args } = request.params;
  switch (name) {
    case "echo":
    case "grown":
      return { content: [{ type: "text", text: String(args?.text ?? name) }] };
    case "mixed":
      return {
        content: [
          { type: "text", text: "before" },
          { type: "image", mimeType: "image/png", data: "iVBORw0KGgo=" },
          { type: "resource_link", name: "notes", uri: "file:///notes.md" },
          { type: "audio", mimeType: "audio/wav", data: "UklGRg==" },
          { type: "text", text: "after" },
        ],
      };
    case "lie":
      return { content: [{ type: "text", text: "{\"count\": \"many\"}" }], structuredContent: { count: "many" } };
    case "fail":
      return { content: [{ type: "text", text: "the disk is full" }], isError: true };
    case "hang":
      log("hang started");
      return await new Promise((resolve) => {
        extra.signal.addEventListener("abort", () => { log("hang cancelled: " + String(extra.signal.reason ?? "")); resolve({ content: [] }); });
      });
    case "crash":
      log("crash");
      process.exit(3);
    case "grow":
      if (!tools.some((t) => t.name === "grown")) {
        tools.push({ name: "grown", description: "Added while running.", inputSchema: empty });
      }
      await server.sendToolListChanged();
      return { content: [{ type: "text", text: "grown" }] };
    case "pid":
      return { content: [{ type: "text", text: String(process.pid) }] };
    default:
      throw new Error(`no tool ${name}`);
  }
});
log(`started ${process.pid}`);
await server.connect(new StdioServerTransport());
