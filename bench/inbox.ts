/**
 * Inbox rows (issue #20): what `inbox.handle` adds to a consumer's transaction. Each transaction
 * inserts one effect row; arms rotated per trial on emptied tables: the bare transaction, the
 * same with `handle` around the effect, with `handle` given a group and a sequence (order at the
 * consumer), and the plain SQL of what `handle` adds (one INSERT … ON CONFLICT DO NOTHING into an
 * identical inbox table) as the limit.
 */
import type pg from 'pg';
import { Outboxer } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { addRow, type BenchContext } from './context.js';
import { percent } from './report.js';
import { groupKey, median, rows, transactionsPerSecond } from './support.js';

const OURS = 'bench_inbox';
const RAW = 'bench_inbox_raw';
const EFFECTS = 'bench_inbox_effects';
const GROUPS = 10_000;
const TABLES = [OURS, `${OURS}_groups`, RAW, `${RAW}_groups`, EFFECTS].map((t) => `"${t}"`).join(', ');

const EFFECT = `INSERT INTO "${EFFECTS}" (n, pad) VALUES ($1, $2)`;
const RAW_RECORD = `INSERT INTO "${RAW}" (inbox, source, message_id, group_key) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`;
const PAD = 'x'.repeat(200);

type Arm = 'bare' | 'ours' | 'ordered' | 'raw';

export async function inboxRows(ctx: BenchContext): Promise<void> {
  const { pool, settings } = ctx;
  await pool.query(`DROP TABLE IF EXISTS ${TABLES}`);
  const instance = (table: string) =>
    new Outboxer({ database: nodePostgres(pool), inboxes: { bench: { table } } }) as unknown as Outboxer<
      pg.PoolClient,
      false
    >;
  const outboxer = instance(OURS);
  await outboxer.migrate();
  await instance(RAW).migrate(); // the same DDL for the plain SQL's table
  await pool.query(`CREATE TABLE "${EFFECTS}" (n bigint NOT NULL, pad text NOT NULL)`);
  const inbox = outboxer.inbox('bench');
  const effect = (client: pg.PoolClient, n: number) => client.query(EFFECT, [n, PAD]);
  const key = () => groupKey(Math.floor(Math.random() * GROUPS), GROUPS);
  const arms: Record<Arm, (client: pg.PoolClient, n: number) => Promise<unknown>> = {
    bare: effect,
    ours: (client, n) => inbox.handle(client, { id: n, source: 'bench' }, () => effect(client, n)),
    ordered: (client, n) =>
      inbox.handle(client, { id: n, source: 'bench', groupKey: key(), sequence: n }, () => effect(client, n)),
    raw: async (client, n) => {
      await client.query(RAW_RECORD, ['bench', 'bench', String(n), null]);
      await effect(client, n);
    },
  };

  for (const writers of [1, 10]) {
    const count = writers === 1 ? rows(settings, 700, 40) : rows(settings, 2500, 100);
    const trials = settings.quick ? 1 : 5;
    const names = Object.keys(arms) as Arm[];
    const t = Object.fromEntries(names.map((name) => [name, [] as number[]])) as Record<Arm, number[]>;
    for (let trial = 0; trial < trials; trial += 1) {
      for (let i = 0; i < names.length; i += 1) {
        const name = names[(i + trial) % names.length]!;
        await pool.query(`TRUNCATE ${TABLES}`);
        await pool.query('CHECKPOINT');
        t[name].push(await transactionsPerSecond(pool, writers, count, arms[name]));
      }
    }
    // Medians of per-trial ratios: each trial's arms ran back to back, under the same load.
    const paired = (a: Arm, b: Arm) => median(t[a].map((x, i) => x / t[b][i]!));
    const figure = (arm: Arm) => ({ value: median(t[arm]), unit: 'txn/s' });
    const kept = paired('ours', 'bare');
    const rawKept = paired('raw', 'bare');
    const txn = (arm: Arm) => `${Math.round(median(t[arm])).toLocaleString('en-US')} txn/s`;
    addRow(ctx, {
      group: 'Inbox',
      what: `Inbox \`handle\`, 1 message per transaction, ${writers} writer${writers === 1 ? '' : 's'}`,
      ours: figure('ours'),
      limit: { label: 'INSERT … ON CONFLICT DO NOTHING beside the effect, plain SQL', figure: figure('raw') },
      ofLimit: percent(paired('ours', 'raw')),
      // Issue #20 asks for the figure, not a bound: nothing is judged.
      target: {
        text: 'overhead against the same transaction without it (no target set)',
        measured: `costs ${percent(1 - kept)}; the plain SQL ${percent(1 - rawKept)}`,
        met: undefined,
      },
      note: `Each transaction inserts one 200-byte effect row; ${count} transactions per trial, ${trials} trial${trials === 1 ? '' : 's'}, four arms rotated per trial, medians of per-trial ratios. The same transaction without the inbox: ${txn('bare')}. \`handle\` adds a SAVEPOINT, the record's INSERT and a RELEASE (three statements where the plain SQL has one); with \`groupKey\` and \`sequence\` (order at the consumer, one upsert of the group's row more, ${GROUPS.toLocaleString('en-US')} groups): ${txn('ordered')}, costs ${percent(1 - paired('ordered', 'bare'))}.`,
    });
  }
}
