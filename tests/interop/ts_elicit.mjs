// The official TypeScript v2 client (@modelcontextprotocol/client) against our HTTP server:
// negotiate 2026-07-28 (pinned), declare form elicitation, answer the one question with
// accept {"confirm": true}, and print the result of order_book(Neuromancer) as one JSON line.
//
// Usage: node ts_elicit.mjs URL      (NODE_PATH is not used: run it with --import-free resolution
// from a directory whose node_modules holds the client; the test copies it there.)
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const url = process.argv[2];
const asked = [];
const client = new Client(
  { name: 'engine-interop', version: '0.0.0' },
  {
    capabilities: { elicitation: { form: {} } },
    versionNegotiation: { mode: { pin: '2026-07-28' } },
  },
);
client.setRequestHandler('elicitation/create', async (request) => {
  asked.push(request.params.message);
  return { action: 'accept', content: { confirm: true } };
});
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const result = await client.callTool({ name: 'order_book', arguments: { title: 'Neuromancer' } });
const text = result.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
console.log(JSON.stringify({
  protocolVersion: client.getNegotiatedProtocolVersion(),
  asked,
  isError: result.isError ?? false,
  text,
  structuredContent: result.structuredContent ?? null,
}));
await client.close();
