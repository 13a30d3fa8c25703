// The official TypeScript MCP client (@modelcontextprotocol/sdk) against
// `retrysafe mcp`, for TestMCPInteropTypeScript. Usage:
//
//   node client.mjs stdio <retrysafe binary> <mcp flags...>   (env passed through)
//   node client.mjs http <endpoint URL> <bearer token>
//
// Lists the tools, calls pix_charge twice for one host-supplied intent
// reference (two spellings of the same charge) and once without a
// reference, and prints one JSON line with what it saw. The client checks
// every structured result against the tool's output schema itself.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, target, ...rest] = process.argv.slice(2);
const ref = process.env.MCP_INTEROP_REF ?? "inv-ts-1";

let transport;
if (mode === "stdio") {
  transport = new StdioClientTransport({ command: target, args: rest, env: { ...process.env }, stderr: "inherit" });
} else if (mode === "http") {
  transport = new StreamableHTTPClientTransport(new URL(target), {
    requestInit: { headers: { Authorization: `Bearer ${rest[0]}` } },
  });
} else {
  console.error("usage: node client.mjs stdio|http ...");
  process.exit(2);
}

const client = new Client({ name: "retrysafe-interop", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();

const call = (args, meta) =>
  client.callTool({ name: "pix_charge", arguments: args, ...(meta ? { _meta: meta } : {}) });
const args = (amount, cpf) => ({ customer_id: "cust-ts", amount, pix_key: cpf, pix_key_type: "cpf" });

const first = await call(args("R$ 180,00", "529.982.247-25"), { "io.retrysafe/intent_ref": ref });
const second = await call(args(180, "52998224725"), { "io.retrysafe/intent_ref": ref });
const refused = await call(args(180, "52998224725"));

console.log(JSON.stringify({
  server: client.getServerVersion(),
  tools: tools.map((t) => ({ name: t.name, title: t.title, annotations: t.annotations, inputSchema: t.inputSchema, hasOutputSchema: !!t.outputSchema })),
  first: { isError: !!first.isError, structured: first.structuredContent },
  second: { isError: !!second.isError, structured: second.structuredContent },
  refused: { isError: !!refused.isError, structured: refused.structuredContent },
}));
await client.close();
