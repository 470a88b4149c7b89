/**
 * Pickup latency: from the moment COMMIT returns to the publisher to the moment the relay is
 * called with the message, with the default polling (pollInterval 1000 ms) and with notify.
 */
import type pg from 'pg';
import { Outboxer, batchRelay } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { addRow, type BenchContext } from './context.js';
import { formatMs } from './report.js';
import { dropTables, payload, quantile, rows, sleep } from './support.js';

const TABLE = 'bench_latency';

async function measure(ctx: BenchContext, notify: boolean, count: number): Promise<number[]> {
  const { pool } = ctx;
  await dropTables(pool, TABLE);
  const calledAt = new Map<number, number>();
  const outboxer = new Outboxer({
    database: nodePostgres(pool),
    outboxes: {
      bench: {
        table: TABLE,
        notify,
        relay: batchRelay(async (batch) => {
          const now = performance.now();
          for (const m of batch) calledAt.set(m.id, now);
        }),
      },
    },
  });
  await outboxer.migrate();
  await outboxer.start();
  const committedAt = new Map<number, number>();
  const client = await pool.connect();
  try {
    await sleep(200);
    for (let n = 0; n < count; n += 1) {
      await client.query('BEGIN');
      const id = await (outboxer as unknown as Outboxer<pg.PoolClient>).publish(client, 'bench', payload(n), {
        groupKey: `order:${n % 100}`,
      });
      await client.query('COMMIT');
      committedAt.set(id, performance.now());
      // Spread over the poll interval: a random pause of 5–35 ms between messages.
      await sleep(5 + Math.random() * 30);
    }
    const deadline = Date.now() + 5_000;
    while (calledAt.size < count && Date.now() < deadline) await sleep(20);
  } finally {
    client.release();
    await outboxer.stop();
    await dropTables(pool, TABLE);
  }
  if (calledAt.size < count) throw new Error(`only ${calledAt.size} of ${count} messages reached the relay`);
  return [...committedAt].map(([id, at]) => calledAt.get(id)! - at);
}

export async function latencyRows(ctx: BenchContext): Promise<void> {
  const count = rows(ctx.settings, 300, 20);
  for (const notify of [false, true]) {
    const latencies = await measure(ctx, notify, count);
    const p50 = quantile(latencies, 0.5);
    const p99 = quantile(latencies, 0.99);
    ctx.figures.set(`latency.${notify ? 'notify' : 'poll'}.p50`, p50);
    addRow(ctx, {
      group: 'Latency',
      what: notify ? 'Pickup latency, `notify: true`' : 'Pickup latency, polling (`pollInterval: 1000`)',
      ours: { value: p50, unit: 'ms', text: `p50 ${formatMs(p50)} ms, p99 ${formatMs(p99)} ms` },
      note: `${count} messages published one per transaction, 5–35 ms apart, by one writer while the relay ran; from COMMIT returning to the relay call, in one process. Min ${formatMs(Math.min(...latencies))} ms, max ${formatMs(Math.max(...latencies))} ms.`,
    });
  }
}
