// The official TypeScript v2 client (@modelcontextprotocol/client) with the Tasks extension's
// client (@modelcontextprotocol/ext-tasks) against our HTTP server: run the task tool `job`,
// answer its question (accept {"go": true}), and print what happened as one JSON line.
//
// Usage: node ts_task.mjs URL TAG
//
// The SDK client discovers the server and answers nothing of the task wire itself: ext-tasks
// sends tools/call and tasks/* through the "raw dispatch" a host provides (the SDK's codecs
// reject task shapes), here plain fetch with the headers 2026-07-28 asks for. Every response's
// replica is noted, so the caller can see that the requests spread over a fleet.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import {
  createApplicationInputHandler,
  createTaskSessionFromClient,
  resultFromTaskOutcome,
} from '@modelcontextprotocol/ext-tasks/client';

const [url, tag] = process.argv.slice(2);
const PROTOCOL = '2026-07-28';
const clientInfo = { name: 'engine-interop-tasks', version: '0.0.0' };
const capabilities = { elicitation: { form: {} } };
const asked = [];
const replicas = [];
const methods = [];
let nextId = 1;

function messageOf(text, id) {
  // A JSON body, or an event stream whose event with our id is the response.
  if (!text.startsWith('event:') && !text.startsWith('data:') && !text.startsWith(':')) {
    return JSON.parse(text);
  }
  for (const event of text.split('\n\n')) {
    const data = event
      .split('\n')
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).trim())
      .join('\n');
    if (!data) continue;
    const message = JSON.parse(data);
    if (message.id === id) return message;
  }
  throw new Error(`no response with id ${id} in the event stream`);
}

async function rawDispatch(request, options) {
  const id = `raw-${nextId++}`;
  const params = request.params ?? {};
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': PROTOCOL,
    'mcp-method': request.method,
  };
  const name = params.name ?? params.uri ?? params.taskId;
  if (typeof name === 'string') headers['mcp-name'] = name;
  const response = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id, method: request.method, params }),
    signal: options?.signal,
  });
  replicas.push(response.headers.get('x-engine-replica'));
  methods.push(request.method);
  const message = messageOf(await response.text(), id);
  if (message.error) return { kind: 'error', error: message.error };
  return { kind: 'result', result: message.result };
}

const client = new Client(clientInfo, {
  capabilities,
  versionNegotiation: { mode: { pin: PROTOCOL } },
});
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const session = createTaskSessionFromClient(client, {
  endpointId: 'engine-interop',
  rawDispatch,
  v2RequestFraming: { protocolVersion: PROTOCOL, clientInfo, clientCapabilities: capabilities },
  onInputRequest: createApplicationInputHandler({
    elicitation: async (request, context) => {
      asked.push({ message: request.params.message, scope: context.scope });
      return { action: 'accept', content: { go: true } };
    },
    sampling: async () => {
      throw new Error('no sampling here');
    },
    roots: async () => ({ roots: [] }),
  }),
});
const statuses = [];
try {
  const execution = await session.callTool('job', { tag, seconds: 0.3 });
  const { outcome } = await execution.settle({
    onEvent(event) {
      if (event.type === 'task') statuses.push(event.task.status);
    },
  });
  const result = resultFromTaskOutcome(outcome);
  const text = result.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  console.log(
    JSON.stringify({
      protocolVersion: client.getNegotiatedProtocolVersion(),
      kind: execution.kind,
      taskId: execution.handle?.taskId ?? null,
      outcome: outcome.status,
      statuses,
      asked,
      text,
      methods,
      replicas,
    }),
  );
} finally {
  await session.close();
  await client.close();
}
