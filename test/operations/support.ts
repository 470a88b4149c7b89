/**
 * What the operations tests share: a local HTTP receiver, an outbox whose destination refuses
 * chosen payloads, and the known state the metrics tests compare against.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Outboxer, functionRelay, type Envelope, type OutboxerOptions } from 'outboxer';
import { publishInTransaction, type Fixture } from '../support/databases.js';

export interface Request {
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** An HTTP server on 127.0.0.1 that answers 204 and keeps every request. */
export async function startReceiver(onRequest?: (request: Request) => void) {
  const requests: Request[] = [];
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const request = { headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
    requests.push(request);
    onRequest?.(request);
    res.writeHead(204).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    requests,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

let instances = 0;

/**
 * Two manual-mode outboxes whose destination refuses the payloads starting with `poison`:
 * `known` (maxAttempts 2, onDead 'park') and `strict` (retried forever).
 */
export function knownOutboxes(fixture: Fixture, extra: Partial<OutboxerOptions<never, boolean>> = {}) {
  const suffix = `${process.pid}_${++instances}`;
  const relay = functionRelay(async (m: Envelope) => {
    if (String(m.payload).startsWith('poison')) throw new Error(`refused ${String(m.payload)}`);
  });
  const outboxer = new Outboxer({
    database: fixture.database,
    name: `metrics_${suffix}`,
    testing: 'manual',
    outboxes: {
      known: { relay, table: `known_${suffix}`, maxAttempts: 2, onDead: 'park' },
      strict: { relay, table: `strict_${suffix}` },
    },
    ...extra,
  }) as Outboxer<never, boolean>;
  return outboxer;
}

/**
 * Publishes and drains a known set of messages:
 * - `known`: poison-1, then 2 and 3 of group g (poison-1 goes dead and parks g: 2 and 3 wait);
 *   ok-1 (group h) and ok-2 (no group) are delivered; poison-2 (no group) goes dead.
 * - `strict`: poison-3 of group s fails twice and holds s-2 behind it.
 *
 * Afterwards: known has 2 delivered, 2 retried, 2 dead-lettered, pending 2, dead 2, 1 parked
 * group; strict has 0 delivered, 2 retried, pending 2, 1 retrying group.
 */
export async function produceKnownState(fixture: Fixture, outboxer: Outboxer<never, boolean>) {
  await outboxer.migrate();
  const ids = await publishInTransaction(fixture, outboxer, [
    { outbox: 'known', payload: 'poison-1', groupKey: 'g' },
    { outbox: 'known', payload: 'g-2', groupKey: 'g' },
    { outbox: 'known', payload: 'g-3', groupKey: 'g' },
    { outbox: 'known', payload: 'ok-1', groupKey: 'h' },
    { outbox: 'known', payload: 'ok-2', groupKey: null },
    { outbox: 'known', payload: 'poison-2', groupKey: null },
    { outbox: 'strict', payload: 'poison-3', groupKey: 's' },
    { outbox: 'strict', payload: 's-2', groupKey: 's' },
  ]);
  const known = await outboxer.drain('known');
  const strict = await outboxer.drain('strict', { maxRounds: 2 });
  return { ids, known, strict };
}
