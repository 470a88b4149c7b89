/**
 * The cost of idling (`BENCH_ONLY=idle`): the statements one relaying node sends to an idle
 * database, per second, counted in the client (every query the engine hands the adapter, each
 * statement of a transaction counted) rather than in the server's statistics, which other work on
 * the shared server moves too. The node relays 4 outboxes of 8 partitions at default settings,
 * without `notify`, and on Postgres with it, then 4 outboxes of 64 partitions with `notify`: the
 * goal is under 2 statements a second with `notify`, whatever the partition count. Counting
 * starts once the node's start-up polls are over; the notification listener's own connection
 * sends nothing while idle (its `LISTEN` is sent once, at connect).
 */
import { Outboxer, batchRelay, type SqlQuery } from 'outboxer';
import type { DatabaseAdapter } from '../src/core/database.js';
import { addRow, judge, type BenchContext } from './context.js';
import type { BenchDatabase } from './database.js';
import { sleep } from './support.js';

const TABLE = 'bench_idle';
const OUTBOXES = 4;

/** What a statement is, from its text (Postgres or MySQL): the kinds an idle node sends. */
function kindOf(text: string): string {
  if (text.includes('_nodes')) return 'heartbeat';
  if (text.includes('AS polled')) return 'poll';
  if (text.includes('_leases')) return 'lease renewal';
  if (/gathered AS|@outboxer_tallies/.test(text)) return 'tally compaction';
  if (/claim AS|recounted_at|_config/.test(text)) return 'recount';
  if (/_prune|@outboxer_pruned/.test(text)) return 'prune';
  if (text.includes('min(next_attempt_at)')) return 'next retry';
  if (text.includes(TABLE)) return 'poll';
  return 'other';
}

/** The adapter, counting each statement by kind. */
function counting(adapter: DatabaseAdapter<unknown, false>) {
  const counts = new Map<string, number>();
  const count = (query: SqlQuery): void => {
    const kind = kindOf(query.text);
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
  };
  const wrapped: DatabaseAdapter<unknown, false> = {
    ...adapter,
    execute: (query) => {
      count(query);
      return adapter.execute(query);
    },
    executeAtomically: (queries) => {
      for (const query of queries) count(query);
      return adapter.executeAtomically(queries);
    },
  };
  return { adapter: wrapped, counts };
}

interface Case {
  readonly what: string;
  readonly partitions: number;
  readonly notify: boolean;
  /** Judged against 2 statements a second (notify). */
  readonly judged: boolean;
}

const CASES: readonly Case[] = [
  {
    what: `${OUTBOXES} outboxes × 8 partitions, defaults (pollInterval 1 s)`,
    partitions: 8,
    notify: false,
    judged: false,
  },
  {
    what: `${OUTBOXES} outboxes × 8 partitions, \`notify: true\``,
    partitions: 8,
    notify: true,
    judged: true,
  },
  {
    what: `${OUTBOXES} outboxes × 64 partitions, \`notify: true\``,
    partitions: 64,
    notify: true,
    judged: true,
  },
];

export async function idleRows<Tx>(ctx: BenchContext<BenchDatabase<Tx>>): Promise<void> {
  const { db } = ctx;
  // A heartbeat per outbox every leaseTimeout / 3 (10 s): a window of several.
  const seconds = ctx.settings.quick ? 2 : 60;
  // NOTIFY is Postgres's: elsewhere `notify: true` is refused at construction.
  for (const c of CASES.filter((c) => !c.notify || db.kind === 'postgres')) {
    await db.dropTables(TABLE);
    const { adapter, counts } = counting(db.adapter() as DatabaseAdapter<unknown, false>);
    const relay = batchRelay(async () => undefined);
    const outboxes = Object.fromEntries(
      Array.from({ length: OUTBOXES }, (_, i) => [
        `idle${i}`,
        { table: TABLE, partitions: c.partitions, notify: c.notify, relay },
      ]),
    );
    const node = new Outboxer({ database: adapter, outboxes });
    await node.migrate();
    await node.start();
    try {
      await sleep(ctx.settings.quick ? 500 : 3000); // the start-up polls, and the first ones after them
      counts.clear();
      const started = performance.now();
      await sleep(seconds * 1000);
      const elapsed = (performance.now() - started) / 1000;
      const total = [...counts.values()].reduce((a, b) => a + b, 0);
      const rate = total / elapsed;
      const breakdown = [...counts.entries()]
        .sort((a, b) => b[1] - a[1])
        .map(([kind, n]) => `${kind} ${(n / elapsed).toFixed(2)}/s`)
        .join(', ');
      ctx.figures.set(`idle.${c.partitions}.${c.notify ? 'notify' : 'poll'}`, rate);
      addRow(ctx, {
        group: 'Idle',
        what: `An idle relaying node, ${c.what}: statements a second`,
        ours: { value: rate, unit: 'statements/s', text: `${rate.toFixed(2)} statements/s` },
        ...(c.judged
          ? { target: { text: '< 2 statements/s', measured: rate.toFixed(2), met: judge(ctx, rate < 2) } }
          : {}),
        note: `Counted in the client over ${elapsed.toFixed(0)} s, leaseTimeout 30 s: ${breakdown || 'none'}.${
          c.notify
            ? ' Workers sleep until a NOTIFY, a retry falling due, or the heartbeat finding a message due; one heartbeat per outbox every leaseTimeout / 3 renews the node’s leases of it.'
            : ' Each idle partition polls every pollInterval, one statement that also reads its next retry time when it finds nothing: the poll interval bounds the latency without notify.'
        }`,
      });
    } finally {
      await node.stop();
      await db.dropTables(TABLE);
    }
  }
}
