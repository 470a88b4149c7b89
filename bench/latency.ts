/**
 * Pickup latency: from the moment COMMIT returns to the publisher to the moment the relay is
 * called with the message. Without NOTIFY (MySQL, and Postgres with `notify` off, its default): a
 * message published by the relaying instance itself (its workers are woken in-process,
 * src/core/local-wakeups.ts), and one published by another instance, which waits for the next
 * poll (pollInterval 1000 ms, and 100 ms on MySQL). On Postgres also `notify: true`.
 */
import { Outboxer, batchRelay } from 'outboxer';
import { addRow, type BenchContext } from './context.js';
import type { BenchDatabase } from './database.js';
import { formatMs } from './report.js';
import { payload, quantile, rows, sleep } from './support.js';

const TABLE = 'bench_latency';

interface Case {
  readonly what: string;
  readonly key: string;
  readonly notify: boolean;
  readonly pollInterval: number;
  /** Published by the relaying instance itself, or by a publish-only instance beside it. */
  readonly publisher: 'relaying' | 'other';
}

async function measure<Tx>(ctx: BenchContext<BenchDatabase<Tx>>, c: Case, count: number): Promise<number[]> {
  const { db } = ctx;
  await db.dropTables(TABLE);
  const calledAt = new Map<number, number>();
  const relaying = new Outboxer({
    database: db.adapter(),
    outboxes: {
      bench: {
        table: TABLE,
        notify: c.notify,
        pollInterval: c.pollInterval,
        relay: batchRelay(async (batch) => {
          const now = performance.now();
          for (const m of batch) calledAt.set(m.id, now);
        }),
      },
    },
  });
  await relaying.migrate();
  const publisher =
    c.publisher === 'relaying'
      ? relaying
      : new Outboxer({ database: db.adapter(), relay: false, outboxes: { bench: { table: TABLE } } });
  await relaying.start();
  const committedAt = new Map<number, number>();
  const connection = await db.connect();
  try {
    await sleep(200);
    for (let n = 0; n < count; n += 1) {
      await connection.query('BEGIN');
      const id = await publisher.publish(connection.tx, 'bench', payload(n), {
        groupKey: `order:${n % 100}`,
      });
      await connection.query('COMMIT');
      committedAt.set(id, performance.now());
      // Spread over the poll interval: a random pause of 5–35 ms between messages.
      await sleep(5 + Math.random() * 30);
    }
    const deadline = Date.now() + 5_000 + c.pollInterval;
    while (calledAt.size < count && Date.now() < deadline) await sleep(20);
  } finally {
    connection.release();
    await relaying.stop();
    await db.dropTables(TABLE);
  }
  if (calledAt.size < count) throw new Error(`only ${calledAt.size} of ${count} messages reached the relay`);
  return [...committedAt].map(([id, at]) => calledAt.get(id)! - at);
}

export async function latencyRows<Tx>(ctx: BenchContext<BenchDatabase<Tx>>): Promise<void> {
  const count = rows(ctx.settings, 300, 20);
  const local: Case = {
    what: 'Pickup latency, published by the relaying instance (in-process wake-up)',
    key: 'local',
    notify: false,
    pollInterval: 1000,
    publisher: 'relaying',
  };
  const polled: Case = {
    what: 'Pickup latency, published by another instance, `pollInterval: 1000`',
    key: 'poll',
    notify: false,
    pollInterval: 1000,
    publisher: 'other',
  };
  const cases: Case[] = ctx.db.dialect.capabilities.notifications
    ? [
        local,
        polled,
        {
          what: 'Pickup latency, `notify: true`',
          key: 'notify',
          notify: true,
          pollInterval: 1000,
          publisher: 'relaying',
        },
      ]
    : [
        local,
        polled,
        {
          what: 'Pickup latency, published by another instance, `pollInterval: 100`',
          key: 'poll100',
          notify: false,
          pollInterval: 100,
          publisher: 'other',
        },
      ];
  for (const c of cases) {
    const latencies = await measure(ctx, c, count);
    const p50 = quantile(latencies, 0.5);
    const p99 = quantile(latencies, 0.99);
    ctx.figures.set(`latency.${c.key}.p50`, p50);
    addRow(ctx, {
      group: 'Latency',
      what: c.what,
      ours: { value: p50, unit: 'ms', text: `p50 ${formatMs(p50)} ms, p99 ${formatMs(p99)} ms` },
      note: `${count} messages published one per transaction, 5–35 ms apart, by one writer while the relay ran; from COMMIT returning to the relay call, in one process. Min ${formatMs(Math.min(...latencies))} ms, max ${formatMs(Math.max(...latencies))} ms.`,
    });
  }
}
