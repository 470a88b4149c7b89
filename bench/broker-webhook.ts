/**
 * The webhook row: a receiver in a child process (node:http, answers 204 to every POST and counts
 * them), and both arms POSTing one request per message through the global fetch (undici, keep-alive),
 * `concurrency` requests of a batch at once, the messages of one group key never two at a time
 * (a batch holds one message per key here, so that rule costs nothing).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { webhookRelay } from 'outboxer/webhook';
import type { BenchMessage, BrokerTarget, Destination } from './broker-destination.js';

const CONCURRENCY = 8;

/** The receiver: prints its port, then counts POSTs; GET /count answers the count. */
const RECEIVER = `
const http = require('node:http');
let count = 0;
const server = http.createServer((req, res) => {
  if (req.method === 'GET') { res.end(String(count)); return; }
  req.on('data', () => {});
  req.on('end', () => { count += 1; res.statusCode = 204; res.end(); });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
process.on('disconnect', () => process.exit(0));
`;

async function startReceiver(): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['-e', RECEIVER], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  const [chunk] = (await once(child.stdout!, 'data')) as [Buffer];
  return { url: `http://127.0.0.1:${chunk.toString().trim()}/hooks`, child };
}

interface Request {
  readonly body: string;
  readonly headers: Record<string, string>;
}

async function webhook(): Promise<Destination<Request[]>> {
  const { url, child } = await startReceiver();
  const post = async (request: Request): Promise<void> => {
    const response = await fetch(url, { method: 'POST', body: request.body, headers: request.headers });
    await response.arrayBuffer();
    if (!response.ok) throw new Error(`the receiver answered ${response.status}`);
  };
  return {
    relay: () => webhookRelay({ url, concurrency: CONCURRENCY }),
    encode: (batch: readonly BenchMessage[]) =>
      batch.map((m) => ({
        body: JSON.stringify({ type: null, timestamp: new Date().toISOString(), data: m.payload }),
        headers: {
          'content-type': 'application/json',
          'user-agent': 'outboxer-webhook',
          ...m.headers,
          'webhook-id': String(m.id),
          'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
        },
      })),
    async send(requests) {
      let next = 0;
      const worker = async (): Promise<void> => {
        while (next < requests.length) await post(requests[next++]!);
      };
      await Promise.all(Array.from({ length: Math.min(CONCURRENCY, requests.length) }, worker));
    },
    async received() {
      return Number(await (await fetch(url.replace('/hooks', '/count'))).text());
    },
    async close() {
      child.disconnect();
      if (child.exitCode === null) await once(child, 'exit');
    },
  };
}

export function webhookTargets(): BrokerTarget[] {
  return [
    {
      what: 'a webhook (node:http receiver in a child process)',
      limitLabel: `fetch POST per message, ${CONCURRENCY} at once per batch of 100, 4 loops`,
      partitions: 4,
      batchSize: 100,
      settings: `one request per message, \`concurrency: ${CONCURRENCY}\` (per batch), the \`{ type, timestamp, data }\` body, no signature, the receiver answering 204`,
      open: webhook,
    },
  ];
}
