// The bench bookshop on the MCP TypeScript SDK v2 (@modelcontextprotocol/server), served the way
// its HTTP guide serves a handler on plain node:http: createMcpHandler(factory) behind the
// localhost Host and Origin guards, toNodeHandler from @modelcontextprotocol/node. Stateless (a
// fresh McpServer per request, as the 2026-07-28 path always is) and in JSON response mode
// (responseMode: 'json', the same wire shape as the other servers).
//
//     node server.mjs --port 8123
//
// Same tool names, same logic and same results as bench/servers/ours.py and official.py, written
// the way the SDK's input_required guide writes them: a handler returns inputRequired(...) while
// an answer is missing and reads the answers on re-entry; what a flow has learned travels in
// requestState, minted and verified by the SDK's createRequestStateCodec (HMAC-SHA256) with the
// bench's shared key. Every handler is async. Texts quote titles the way Python's repr does, so
// every server's results are the same strings.
import { createServer } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

import { localhostHostValidation, localhostOriginValidation, toNodeHandler } from '@modelcontextprotocol/node';
import { acceptedContent, createMcpHandler, createRequestStateCodec, inputRequired, inputResponse, McpServer } from '@modelcontextprotocol/server';
import * as z from 'zod/v4';

const KEY = process.env.BENCH_KEY ?? 'bench-shared-secret-0123456789abcdef-0123456789';
const INVENTORY = { Dune: 7, Neuromancer: 0 };
const SLOW_MS = 50;

// Schemas at module scope, as the SDK's HTTP guide asks of what a per-request factory uses: the
// SDK then converts and compiles each once, not on every request.
const Backorder = z.object({ confirm: z.boolean().describe('Order anyway and wait?') });
const Confirm = z.object({ confirm: z.boolean().describe('Go ahead?') });
const ByTitle = z.object({ title: z.string() });
const ByGenre = z.object({ genre: z.string() });
const ByTopic = z.object({ topic: z.string() });
const ByItem = z.object({ item: z.string() });

const stateCodec = createRequestStateCodec({ key: KEY, ttlSeconds: 600 });

/** A string as Python's repr() quotes it (enough for the bench's titles). */
function quoted(text) {
    if (text.includes("'") && !text.includes('"')) return `"${text}"`;
    return `'${text.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}

function textResult(text) {
    return { content: [{ type: 'text', text }] };
}

function sampledText(responses, key) {
    const view = inputResponse(responses, key);
    if (view.kind !== 'sampling') return undefined;
    const content = view.result.content;
    return content?.type === 'text' ? content.text : 'the classics';
}

async function checkStock(title) {
    return { title, copies: INVENTORY[title] ?? 0 };
}

function buildServer() {
    const server = new McpServer({ name: 'Bookshop', version: '1.0.0' }, { requestState: { verify: stateCodec.verify } });

    // --- 1 round: reserve_book -----------------------------------------------------------------
    server.registerTool(
        'reserve_book',
        { description: 'Reserve a copy of a book.', inputSchema: ByTitle },
        async ({ title }) => {
            const stock = await checkStock(title);
            if (stock.copies === 0) return textResult(`${quoted(title)} is out of stock.`);
            return textResult(`Reserved ${quoted(title)} (${stock.copies - 1} copies left).`);
        }
    );

    // --- 2 rounds: order_book (one elicitation when out of stock) ---------------------------------
    server.registerTool(
        'order_book',
        { description: 'Order a book from the shop.', inputSchema: ByTitle },
        async ({ title }, ctx) => {
            const state = ctx.mcpReq.requestState();
            const stock = state?.stock ?? (await checkStock(title));
            let backorder = { confirm: true };
            if (stock.copies === 0) {
                const answer = acceptedContent(ctx.mcpReq.inputResponses, 'backorder', Backorder);
                if (answer === undefined) {
                    return inputRequired({
                        inputRequests: {
                            backorder: inputRequired.elicit({
                                message: `${quoted(title)} is out of stock (2-3 weeks). Order anyway?`,
                                requestedSchema: Backorder
                            })
                        },
                        requestState: await stateCodec.mint({ stock })
                    });
                }
                backorder = answer;
            }
            if (!backorder.confirm) return textResult('No order placed.');
            if (stock.copies === 0) return textResult(`Backordered ${quoted(title)}; it ships in 2-3 weeks.`);
            return textResult(`Ordered ${quoted(title)}.`);
        }
    );

    // --- chain: Sample -> Elicit -> Elicit ----------------------------------------------------------
    server.registerTool(
        'recommend_and_order',
        { description: "Ask the client's model for a title, then confirm twice.", inputSchema: ByGenre },
        async ({ genre }, ctx) => {
            const responses = ctx.mcpReq.inputResponses;
            const state = ctx.mcpReq.requestState() ?? {};
            const suggestion = state.suggestion ?? sampledText(responses, 'suggestion');
            if (suggestion === undefined) {
                const prompt = `Suggest one ${genre} book title. Answer with the title only.`;
                return inputRequired({
                    inputRequests: {
                        suggestion: inputRequired.createMessage({
                            messages: [{ role: 'user', content: { type: 'text', text: prompt } }],
                            maxTokens: 50
                        })
                    }
                });
            }
            const pick = state.pick ?? (state.suggestion === undefined ? undefined : acceptedContent(responses, 'pick', Confirm));
            if (pick === undefined) {
                return inputRequired({
                    inputRequests: { pick: inputRequired.elicit({ message: `Order ${quoted(suggestion)}?`, requestedSchema: Confirm }) },
                    requestState: await stateCodec.mint({ suggestion })
                });
            }
            const again = state.pick === undefined ? undefined : acceptedContent(responses, 'again', Confirm);
            if (again === undefined) {
                return inputRequired({
                    inputRequests: {
                        again: inputRequired.elicit({
                            message: `Really order ${quoted(suggestion)}? It ships in 2-3 weeks.`,
                            requestedSchema: Confirm
                        })
                    },
                    requestState: await stateCodec.mint({ suggestion, pick })
                });
            }
            if (!(pick.confirm && again.confirm)) return textResult('No order placed.');
            return textResult(`Ordered ${quoted(suggestion)} (${genre}).`);
        }
    );

    // --- a 1 MB sampled answer, then one more question ------------------------------------------------
    server.registerTool(
        'publish_draft',
        {
            description: "Have the client's model draft an article, then ask before publishing it.",
            inputSchema: ByTopic
        },
        async ({ topic }, ctx) => {
            const responses = ctx.mcpReq.inputResponses;
            const state = ctx.mcpReq.requestState();
            const draft = state?.draft ?? sampledText(responses, 'draft');
            if (draft === undefined) {
                return inputRequired({
                    inputRequests: {
                        draft: inputRequired.createMessage({
                            messages: [{ role: 'user', content: { type: 'text', text: `Write a long article about ${topic}.` } }],
                            maxTokens: 400_000
                        })
                    }
                });
            }
            const ok = state?.draft === undefined ? undefined : acceptedContent(responses, 'ok', Confirm);
            if (ok === undefined) {
                return inputRequired({
                    inputRequests: {
                        ok: inputRequired.elicit({ message: `Publish the ${draft.length}-character draft?`, requestedSchema: Confirm })
                    },
                    requestState: await stateCodec.mint({ draft })
                });
            }
            if (!ok.confirm) return textResult('Not published.');
            return textResult(`Published ${draft.length} characters on ${quoted(topic)}.`);
        }
    );

    // --- two independent slow resolvers --------------------------------------------------------------
    server.registerTool(
        'slow_pair',
        { description: 'Two lookups that do not depend on each other, 50 ms each.', inputSchema: ByItem },
        async ({ item }) => {
            const [left, right] = await Promise.all([
                sleep(SLOW_MS).then(() => `left:${item}`),
                sleep(SLOW_MS).then(() => `right:${item}`)
            ]);
            return textResult(`${left} ${right}`);
        }
    );

    return server;
}

// --- serving -----------------------------------------------------------------------------------------

function portFromArgs(argv) {
    const at = argv.indexOf('--port');
    const port = at >= 0 ? Number(argv[at + 1]) : Number.NaN;
    if (!Number.isInteger(port) || port <= 0) {
        console.error('usage: node server.mjs --port PORT');
        process.exit(2);
    }
    return port;
}

const port = portFromArgs(process.argv);
const handler = createMcpHandler(buildServer, { responseMode: 'json' });
const nodeHandler = toNodeHandler(handler);
const validateHost = localhostHostValidation();
const validateOrigin = localhostOriginValidation();
const httpServer = createServer((req, res) => {
    if (!validateHost(req, res) || !validateOrigin(req, res)) return;
    void nodeHandler(req, res);
});
httpServer.listen(port, '127.0.0.1');

process.on('SIGTERM', async () => {
    httpServer.close();
    await handler.close();
    process.exit(0);
});
