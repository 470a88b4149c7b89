/**
 * The webhook receiver against real servers: our webhook relay sends to it mounted in node:http,
 * Express 5, Fastify 5 and Hono, with Postgres behind both sides. Each message has exactly one
 * effect although every first answer is lost (the relay sends each message twice); a transaction
 * that fails at commit is answered 500, so the relay keeps the message, and the inbox holds
 * nothing of it. Signatures: webhook-signatures.test.ts; mounting mistakes and options:
 * webhook-mounting.test.ts.
 */
import { describe, expect, test } from 'vitest';
import { Outboxer, type PublishInput } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { webhookRelay, type WebhookFetch } from 'outboxer/webhook';
import { effects, inboxRows } from './support.js';
import {
  consumer,
  failHandlerOf,
  fixture,
  frameworks,
  handled,
  makeReceiver,
  runner,
  secret,
  setUpWebhookConsumer,
  type Mounted,
} from './webhook-support.js';

setUpWebhookConsumer();

/** A producer in manual testing mode whose relay sends to `mounted` through `fetch`. */
async function producerFor(table: string, mounted: Mounted, fetch: WebhookFetch) {
  const producer = new Outboxer({
    database: nodePostgres(fixture.pool),
    testing: 'manual',
    logger: false,
    outboxes: { orders: { table, relay: webhookRelay({ url: mounted.url, secret, fetch }) } },
  });
  await producer.migrate();
  return producer;
}

async function publish(producer: Outboxer<never>, inputs: PublishInput[]): Promise<string[]> {
  const ids = await fixture.transaction((tx) => producer.publishMany(tx as never, inputs));
  return ids.map(String);
}

const orders: PublishInput[] = [1, 2, 3, 4, 5, 6].map((n) => ({
  outbox: 'orders',
  payload: { n },
  type: 'order.step',
  groupKey: n % 2 === 0 ? 'order:even' : 'order:odd',
}));

describe.each(frameworks)('the webhook receiver in $name', ({ name, mount }) => {
  const table = `outbox_${name.replace(/\W/g, '').toLowerCase()}`;

  test('each message has one effect, in order per group, though each was delivered twice', async () => {
    const mounted = await mount(makeReceiver());
    const answers: Array<{ id: string; status: number }> = [];
    // The relay's network: every first answer is lost after the receiver committed, so the relay
    // sends that message again (with a new timestamp and signature).
    const lossy: WebhookFetch = async (url, init) => {
      const response = await mounted.fetch(url, init);
      const id = init.headers['webhook-id']!;
      const first = !answers.some((a) => a.id === id);
      answers.push({ id, status: response.status });
      if (first) throw new Error('the connection was reset before the answer arrived');
      return response;
    };
    const producer = await producerFor(table, mounted, lossy);
    try {
      const ids = await publish(producer, orders);
      const result = await producer.drain('orders');
      expect(result.pending).toBe(0);
      expect(result.delivered.map((m) => String(m.id)).sort()).toEqual([...ids].sort());

      const rows = await effects(fixture);
      expect(rows.map((r) => r.message_id).sort()).toEqual([...ids].sort());
      for (const group of ['order:odd', 'order:even']) {
        const published = ids.filter((_, i) => orders[i]!.groupKey === group);
        expect(rows.filter((r) => r.group_key === group).map((r) => r.message_id)).toEqual(published);
      }
      expect(rows[0]!.payload).toMatchObject({ type: 'order.step', data: { n: 1 } });
      // Each message: handled (204), then recognised (200 duplicate) and not handled again.
      for (const id of ids)
        expect(answers.filter((a) => a.id === id).map((a) => a.status)).toEqual([204, 200]);
      expect([...handled].sort()).toEqual([...ids].sort());
      expect(await inboxRows(fixture)).toBe(ids.length);
    } finally {
      await producer.close();
      await mounted.close();
    }
  });

  test('a failed commit or handler is answered 500: the relay keeps the message, the inbox holds nothing', async () => {
    const mounted = await mount(makeReceiver());
    const producer = await producerFor(`${table}_fail`, mounted, mounted.fetch);
    try {
      const [first, second, third] = await publish(producer, orders.slice(0, 3)); // odd, even, odd
      runner.failCommit = true; // the first message's commit fails
      failHandlerOf(second); // the second message's handler throws
      const round = await producer.drain('orders', { maxRounds: 1 });
      expect(round.delivered).toEqual([]);
      expect(round.retried.map((r) => String(r.envelope.id)).sort()).toEqual([first, second].sort());
      for (const { error } of round.retried) expect(error).toMatch(/500/);
      expect(handled.sort()).toEqual([first, second].sort()); // the third waits behind the first
      expect(await inboxRows(fixture)).toBe(0);
      expect(await effects(fixture)).toEqual([]);
      const logged = JSON.stringify(consumer.logger.lines.filter((line) => line.level === 'error'));
      expect(logged).toContain('the commit failed');
      expect(logged).toContain('the handler failed');

      failHandlerOf(undefined);
      const rest = await producer.drain('orders');
      expect(rest.pending).toBe(0);
      const rows = (await effects(fixture)).map((r) => r.message_id);
      expect([...rows].sort()).toEqual([first, second, third].sort());
      expect(rows.filter((id) => id !== second)).toEqual([first, third]);
    } finally {
      await producer.close();
      await mounted.close();
    }
  });
});
