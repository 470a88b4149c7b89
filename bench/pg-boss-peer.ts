/**
 * pg-boss 12 as a peer: send/insert with `{ db }` inside the caller's transaction; fetch +
 * complete to deliver. Two deliveries: a standard queue as fast as pg-boss goes (no order), and
 * per-key order across several consumers, which in pg-boss 12 only a `key_strict_fifo` queue
 * keeps (docs/relays/pg-boss.md, "Order"), beside outboxer's group-ordered relay.
 */
import type pg from 'pg';
import { PgBoss } from 'pg-boss';
import { pgBossJobId } from 'outboxer/pg-boss';
import type { BenchContext } from './context.js';
import { deliverFigure, type Peer } from './peer.js';
import type { Figure } from './report.js';
import { groupKey, payload } from './support.js';

const SCHEMA = 'bench_pgboss';
const FIFO_SCHEMA = 'bench_pgboss_fifo';

async function startBoss(ctx: BenchContext, schema: string, max: number): Promise<PgBoss> {
  await ctx.pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  const boss = new PgBoss({
    connectionString: ctx.settings.url,
    schema,
    max,
    supervise: false,
    schedule: false,
    migrate: true,
  });
  boss.on('error', (error) => ctx.log(`  pg-boss error: ${String(error)}`));
  await boss.start();
  return boss;
}

export async function pgBossPeer(ctx: BenchContext): Promise<Peer> {
  const boss = await startBoss(ctx, SCHEMA, 4);
  await boss.createQueue('bench');
  const db = (client: pg.PoolClient) => ({
    executeSql: (text: string, values?: unknown[]) => client.query(text, values),
  });
  return {
    name: 'pg-boss',
    publisher: {
      one: (client, n) => boss.send('bench', payload(n), { db: db(client) }),
      hundred: (client, n) =>
        boss.insert(
          'bench',
          Array.from({ length: 100 }, (_, i) => ({ data: payload(n * 100 + i) })),
          { db: db(client) },
        ),
      reset: async () => void (await ctx.pool.query(`TRUNCATE ${SCHEMA}.job`)),
    },
    async relay(count, capMs) {
      await ctx.pool.query(`TRUNCATE ${SCHEMA}.job`);
      for (let start = 0; start < count; start += 5_000) {
        const size = Math.min(5_000, count - start);
        await boss.insert(
          'bench',
          Array.from({ length: size }, (_, i) => ({ data: payload(start + i) })),
        );
      }
      await ctx.pool.query(`VACUUM (ANALYZE) ${SCHEMA}.job`);
      let delivered = 0;
      const started = performance.now();
      while (delivered < count && performance.now() - started < capMs) {
        const jobs = await boss.fetch('bench', { batchSize: 100 });
        if (jobs.length === 0) break;
        delivered += jobs.length;
        await boss.complete(
          'bench',
          jobs.map((j) => j.id),
        );
      }
      return deliverFigure(delivered, count, started, capMs);
    },
    close: async () => {
      await boss.stop({ graceful: false });
      await ctx.pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
    },
  };
}

/**
 * `count` jobs over `groups` keys on a `key_strict_fifo` queue, as outboxer's pg-boss relay inserts
 * them (the group key as singletonKey, job ids ordered like the outbox ids), delivered by
 * `consumers` loops of fetch(100) + complete: each fetch takes at most one job per key, its head.
 */
export async function pgBossOrderedDelivery(
  ctx: BenchContext,
  o: { count: number; groups: number; consumers: number; capMs: number },
): Promise<{ figure: Figure; note?: string }> {
  const boss = await startBoss(ctx, FIFO_SCHEMA, o.consumers + 1);
  try {
    await boss.createQueue('bench', { policy: 'key_strict_fifo' });
    for (let start = 0; start < o.count; start += 5_000) {
      const size = Math.min(5_000, o.count - start);
      await boss.insert(
        'bench',
        Array.from({ length: size }, (_, i) => {
          const n = start + i;
          return {
            id: pgBossJobId({ outbox: 'bench', id: n + 1 }),
            data: payload(n),
            singletonKey: groupKey(n, o.groups),
          };
        }),
      );
    }
    await ctx.pool.query(`VACUUM (ANALYZE) ${FIFO_SCHEMA}.job`);
    let delivered = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: o.consumers }, async () => {
        while (delivered < o.count && performance.now() - started < o.capMs) {
          const jobs = await boss.fetch('bench', { batchSize: 100 });
          if (jobs.length === 0) {
            if (delivered >= o.count) break;
            continue; // every key's head is held by another consumer
          }
          delivered += jobs.length;
          await boss.complete(
            'bench',
            jobs.map((j) => j.id),
          );
        }
      }),
    );
    return deliverFigure(delivered, o.count, started, o.capMs);
  } finally {
    await boss.stop({ graceful: false });
    await ctx.pool.query(`DROP SCHEMA IF EXISTS ${FIFO_SCHEMA} CASCADE`);
  }
}
