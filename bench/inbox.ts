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
import { transactionsPerSecond } from './database.js';
import type { PostgresBench } from './postgres.js';
import { groupKey, median, rows } from './support.js';

const OURS = 'bench_inbox';
const RAW = 'bench_inbox_raw';
const EFFECTS = 'bench_inbox_effects';
const GROUPS = 10_000;
const TABLES = [OURS, `${OURS}_groups`, RAW, `${RAW}_groups`, EFFECTS].map((t) => `"${t}"`).join(', ');

const EFFECT = `INSERT INTO "${EFFECTS}" (n, pad) VALUES ($1, $2)`;
const RAW_RECORD = `INSERT INTO "${RAW}" (inbox, source, message_id, group_key) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`;
const PAD = 'x'.repeat(200);

type Arm = 'bare' | 'ours' | 'ordered' | 'raw';

export async function inboxRows(ctx: BenchContext<PostgresBench>): Promise<void> {
  const { settings } = ctx;
  const { pool } = ctx.db;
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
        t[name].push(
          await transactionsPerSecond(ctx.db, writers, count, (connection, n) =>
            arms[name](connection.tx, n),
          ),
        );
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
      note: `Each transaction inserts one 200-byte effect row; ${count} transactions per trial, ${trials} trial${trials === 1 ? '' : 's'}, four arms rotated per trial, medians of per-trial ratios. The same transaction without the inbox: ${txn('bare')}. \`handle\` adds a SAVEPOINT, the record's INSERT and a RELEASE (three statements where the plain SQL has one); with \`groupKey\` and \`sequence\` (order at the consumer: the upsert of the group's row, in the record's statement on Postgres and one statement more elsewhere, ${GROUPS.toLocaleString('en-US')} groups): ${txn('ordered')}, costs ${percent(1 - paired('ordered', 'bare'))}.`,
    });
  }
}

const STORE = 'bench_inbox_store';
const STORE_OUTBOX = 'bench_inbox_store_messages';
const STORE_RAW = 'bench_inbox_store_raw';
const STORE_QUEUE = 'bench_inbox_store_queue';
const STORE_TABLES = [STORE, `${STORE}_groups`, STORE_RAW, `${STORE_RAW}_groups`, STORE_QUEUE, EFFECTS]
  .map((t) => `"${t}"`)
  .join(', ');
const STORE_BATCH = 100;

/**
 * Store, then process: N messages stored by 10 writers (one `store` per transaction), then
 * processed by one partition with a trivial handler (one effect row), end to end, in messages/s.
 * The limit is the same work in plain SQL: the store's INSERT … ON CONFLICT DO NOTHING and the
 * queue row's INSERT; a worker that reads the queue in id order 100 rows at a time, processes
 * each in its own transaction (the processed record's INSERT … ON CONFLICT and the effect) and
 * deletes the batch.
 */
export async function inboxStoreRows(ctx: BenchContext<PostgresBench>): Promise<void> {
  const { settings } = ctx;
  const { pool } = ctx.db;
  await pool.query(`DROP TABLE IF EXISTS ${STORE_TABLES}`);
  const transaction = async <T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK');
      throw error;
    } finally {
      client.release();
    }
  };
  const outboxer = new Outboxer({
    database: nodePostgres(pool),
    logger: false,
    inboxes: {
      bench: {
        table: STORE,
        process: {
          table: STORE_OUTBOX,
          transaction,
          handler: (_message, client) => client.query(EFFECT, [0, PAD]),
          batchSize: STORE_BATCH,
          pollInterval: 10,
        },
      },
    },
  });
  await outboxer.migrate();
  await new Outboxer({ database: nodePostgres(pool), inboxes: { bench: { table: STORE_RAW } } }).migrate();
  await pool.query(`CREATE TABLE IF NOT EXISTS "${EFFECTS}" (n bigint NOT NULL, pad text NOT NULL)`);
  await pool.query(
    `CREATE TABLE "${STORE_QUEUE}" (id bigserial PRIMARY KEY, group_key text, payload jsonb NOT NULL)`,
  );
  const inbox = outboxer.inbox('bench');
  // The plain arm's records go to a table of its own, truncated with the others before each arm.
  const storeRawRecord = RAW_RECORD.replace(`"${RAW}"`, `"${STORE_RAW}"`);
  const payload = { pad: PAD };
  const key = (n: number) => groupKey(n % GROUPS, GROUPS);

  const ours = async (count: number): Promise<number> => {
    const storing = await transactionsPerSecond(ctx.db, 10, count, (connection, n) =>
      inbox.store(connection.tx, { id: n, source: 'bench', groupKey: key(n), payload }),
    );
    const started = performance.now();
    await outboxer.start();
    while ((await outboxer.counts(inbox.outbox!)).pending > 0)
      await new Promise((resolve) => setTimeout(resolve, 5));
    const processing = count / ((performance.now() - started) / 1000);
    await outboxer.stop();
    return 1 / (1 / storing + 1 / processing);
  };
  const raw = async (count: number): Promise<number> => {
    const storing = await transactionsPerSecond(ctx.db, 10, count, async (connection, n) => {
      const { rowCount } = await connection.tx.query(storeRawRecord, ['bench', 'bench', String(n), key(n)]);
      if (rowCount === 1)
        await connection.tx.query(`INSERT INTO "${STORE_QUEUE}" (group_key, payload) VALUES ($1, $2)`, [
          key(n),
          payload,
        ]);
    });
    const started = performance.now();
    for (;;) {
      const { rows: batch } = await pool.query<{ id: string }>(
        `SELECT id, group_key, payload FROM "${STORE_QUEUE}" ORDER BY id LIMIT ${STORE_BATCH}`,
      );
      if (batch.length === 0) break;
      for (const row of batch)
        await transaction(async (client) => {
          await client.query(storeRawRecord, ['processed', 'bench', row.id, null]);
          await client.query(EFFECT, [0, PAD]);
        });
      await pool.query(`DELETE FROM "${STORE_QUEUE}" WHERE id = ANY($1::bigint[])`, [batch.map((r) => r.id)]);
    }
    const processing = count / ((performance.now() - started) / 1000);
    return 1 / (1 / storing + 1 / processing);
  };

  const count = rows(settings, 5000, 200);
  const trials = settings.quick ? 1 : 3;
  const t = { ours: [] as number[], raw: [] as number[] };
  for (let trial = 0; trial < trials; trial += 1) {
    for (const arm of trial % 2 === 0 ? (['ours', 'raw'] as const) : (['raw', 'ours'] as const)) {
      await pool.query(`TRUNCATE ${STORE_TABLES}`);
      await pool.query('CHECKPOINT');
      t[arm].push(await (arm === 'ours' ? ours(count) : raw(count)));
    }
  }
  const figure = (values: number[]) => ({ value: median(values), unit: 'msg/s' });
  const ofLimit = percent(median(t.ours.map((x, i) => x / t.raw[i]!)));
  addRow(ctx, {
    group: 'Inbox',
    what: 'Inbox store, then process: 10 writers store, 1 partition processes',
    ours: figure(t.ours),
    limit: {
      label:
        'INSERT … ON CONFLICT + queue INSERT; read 100 by id, one transaction each, DELETE the batch, plain SQL',
      figure: figure(t.raw),
    },
    ofLimit,
    // Issue #20 asks for the figure beside its limit, not a bound: nothing is judged.
    target: {
      text: 'throughput beside its plain-SQL limit (no target set)',
      measured: `${ofLimit} of the plain SQL`,
      met: undefined,
    },
    note: `${count} messages of 200 bytes over ${GROUPS.toLocaleString('en-US')} groups per trial, ${trials} trial${trials === 1 ? '' : 's'}, arms alternated; end to end: 1 / (1 / store rate + 1 / process rate), each measured on its own. Processing runs one consumer transaction per message, as the handler needs (the effect and the processed record commit together); the engine adds its savepoint, the group's order upsert and its settle per batch.`,
  });
}
