/**
 * Publish rows: outboxer's publish inside a transaction against the same INSERT written by hand,
 * into identical tables (outboxer's own DDL), at the same number of writers, in alternating trials.
 */
import pg from 'pg';
import { Outboxer, type OutboxOptions } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { addRow, judge, type BenchContext } from './context.js';
import { percent } from './report.js';
import { dropTables, groupKey, median, payload, rows, transactionsPerSecond } from './support.js';

const OURS = 'bench_pub';
const RAW = 'bench_pub_raw';
const GROUPS = 10_000;
const COLUMNS = '(outbox, partition, group_key, type, payload, headers)';

/** The one-row INSERT of outboxer's columns, written by hand: the limit of a single-message publish. */
export const plainInsert = (table: string): string =>
  `INSERT INTO "${table}" ${COLUMNS} VALUES ($1, $2, $3, $4, $5, $6)`;

const RAW_INSERT = plainInsert(RAW);
const RAW_INSERT_NOTIFY = `INSERT INTO "${RAW}" ${COLUMNS} SELECT $1, $2, $3, $4, $5::json, $6::json FROM (SELECT pg_notify($7, $8)) AS n`;
const RAW_INSERT_LOCK = `INSERT INTO "${RAW}" ${COLUMNS} SELECT $1, $2, $3, $4, $5::json, $6::json FROM (SELECT pg_advisory_xact_lock(hashtextextended($3, 0))) AS l`;

function rawMultiInsert(count: number): string {
  const tuples = Array.from({ length: count }, (_, i) => {
    const b = i * 6;
    return `($${b + 1}, $${b + 2}, $${b + 3}, $${b + 4}, $${b + 5}, $${b + 6})`;
  });
  return `INSERT INTO "${RAW}" ${COLUMNS} VALUES ${tuples.join(', ')}`;
}

const randomKey = (): string => groupKey(Math.floor(Math.random() * GROUPS), GROUPS);

interface Trials {
  ours: number[];
  raw: number[];
}

/**
 * Runs every arm once per trial, rotating which goes first, on emptied tables after a checkpoint;
 * returns each arm's figures in trial order, so that figures of one trial can be paired.
 */
async function rotate<K extends string>(
  ctx: BenchContext,
  trials: number,
  arms: Record<K, () => Promise<number>>,
): Promise<Record<K, number[]>> {
  const names = Object.keys(arms) as K[];
  const result = Object.fromEntries(names.map((k) => [k, [] as number[]])) as Record<K, number[]>;
  for (let trial = 0; trial < trials; trial += 1) {
    for (let i = 0; i < names.length; i += 1) {
      const name = names[(i + trial) % names.length]!;
      await ctx.pool.query(`TRUNCATE "${OURS}", "${RAW}"`);
      await ctx.pool.query('CHECKPOINT');
      result[name].push(await arms[name]());
    }
  }
  return result;
}

const alternate = (
  ctx: BenchContext,
  trials: number,
  ours: () => Promise<number>,
  raw: () => Promise<number>,
) => rotate(ctx, trials, { raw, ours }) as Promise<Trials>;

/** The median of the per-trial ratios a/b: each trial's arms ran back to back, under the same load. */
const paired = (a: number[], b: number[]): number => median(a.map((x, i) => x / b[i]!));
const pairedRatio = (t: Trials): number => paired(t.ours, t.raw);

function spread(t: Trials): string {
  const ratios = t.ours.map((o, i) => o / t.raw[i]!);
  if (ratios.length < 2) return 'one trial';
  return `${ratios.length} trials, per-trial ratios ${percent(Math.min(...ratios))}–${percent(Math.max(...ratios))}, median ${percent(median(ratios))}`;
}

export async function publishRows(ctx: BenchContext): Promise<void> {
  const { pool, settings } = ctx;
  const trials = settings.quick ? 1 : 7;
  await dropTables(pool, OURS);
  await dropTables(pool, RAW);
  const instance = (options: Partial<OutboxOptions> = {}) =>
    new Outboxer({
      database: nodePostgres(pool),
      relay: false,
      outboxes: { bench: { table: OURS, ...options } },
    });
  // Identical tables and indexes: outboxer's own DDL for both.
  await instance().migrate();
  await new Outboxer({
    database: nodePostgres(pool),
    relay: false,
    outboxes: { bench: { table: RAW } },
  }).migrate();

  const publishOne = (outboxer: Outboxer<pg.PoolClient>) => (client: pg.PoolClient, n: number) =>
    outboxer.publish(client, 'bench', payload(n), { groupKey: randomKey() });
  const rawOne =
    (text: string, extra: (key: string) => unknown[] = () => []) =>
    (client: pg.PoolClient, n: number) => {
      const key = randomKey();
      return client.query(text, ['bench', 0, key, null, JSON.stringify(payload(n)), null, ...extra(key)]);
    };

  // 1 and 10 writers, one message per transaction.
  for (const writers of [1, 10]) {
    // Ten writers commit in a fraction of a second: longer trials keep one slow flush from deciding one.
    const count = writers === 1 ? rows(settings, 700, 40) : rows(settings, 5000, 100);
    const outboxer = instance() as unknown as Outboxer<pg.PoolClient>;
    const t = await alternate(
      ctx,
      trials,
      () => transactionsPerSecond(pool, writers, count, publishOne(outboxer)),
      () => transactionsPerSecond(pool, writers, count, rawOne(RAW_INSERT)),
    );
    const ours = median(t.ours);
    const raw = median(t.raw);
    ctx.figures.set(`publish.${writers}`, ours);
    ctx.figures.set(`publish.${writers}.raw`, raw);
    addRow(ctx, {
      group: 'Publish',
      what: `Publish, 1 message per transaction, ${writers} writer${writers === 1 ? '' : 's'}`,
      ours: { value: ours, unit: 'txn/s' },
      limit: { label: 'one-row INSERT per transaction', figure: { value: raw, unit: 'txn/s' } },
      ofLimit: percent(pairedRatio(t)),
      target: {
        text: '≥ 85% of the limit',
        measured: percent(pairedRatio(t)),
        met: judge(ctx, pairedRatio(t) >= 0.85),
      },
      spec: writers === 1 ? '1,000 txn/s' : '5,500 txn/s',
      note: `${count} transactions per trial; figures are medians of each side, the ratio the median of per-trial ratios; ${spread(t)}.`,
    });
  }

  // notify and serializeWrites at 10 writers: their cost against the plain row just measured.
  const variants = [
    {
      what: 'Same with `notify: true` (10 writers)',
      options: { notify: true },
      raw: rawOne(RAW_INSERT_NOTIFY, () => ['outboxer', 'outboxer:bench:0']),
      rawLabel: 'INSERT … FROM (SELECT pg_notify(…)), one statement',
      spec: '3,500 txn/s',
      key: 'notify',
    },
    {
      what: 'Same with `serializeWrites: true` (10 writers)',
      options: { serializeWrites: true },
      raw: rawOne(RAW_INSERT_LOCK),
      rawLabel: 'INSERT … FROM (SELECT pg_advisory_xact_lock(…)), one statement',
      spec: '3,700 txn/s',
      key: 'serialize',
    },
  ];
  for (const variant of variants) {
    const count = rows(settings, 2500, 100);
    const plainOutboxer = instance() as unknown as Outboxer<pg.PoolClient>;
    const outboxer = instance(variant.options) as unknown as Outboxer<pg.PoolClient>;
    // A relay node LISTENs in real life: Postgres only signals backends that listen.
    const listener = new pg.Client({ connectionString: settings.url });
    let notifications = 0;
    if (variant.key === 'notify') {
      await listener.connect();
      listener.on('notification', () => (notifications += 1));
      await listener.query('LISTEN outboxer');
    }
    try {
      // Four arms per trial: outboxer with and without the option, plain SQL with and without it.
      const t = await rotate(ctx, settings.quick ? 1 : 5, {
        plain: () => transactionsPerSecond(pool, 10, count, publishOne(plainOutboxer)),
        ours: () => transactionsPerSecond(pool, 10, count, publishOne(outboxer)),
        raw: () => transactionsPerSecond(pool, 10, count, variant.raw),
        rawPlain: () => transactionsPerSecond(pool, 10, count, rawOne(RAW_INSERT)),
      });
      const ours = median(t.ours);
      const raw = median(t.raw);
      const kept = paired(t.ours, t.plain);
      const rawKept = paired(t.raw, t.rawPlain);
      ctx.figures.set(`publish.${variant.key}`, ours);
      addRow(ctx, {
        group: 'Publish',
        what: variant.what,
        ours: { value: ours, unit: 'txn/s' },
        limit: { label: variant.rawLabel, figure: { value: raw, unit: 'txn/s' } },
        ofLimit: percent(paired(t.ours, t.raw)),
        target: {
          text: 'costs ≤ 20% (against outboxer without it, same trials)',
          measured: `costs ${percent(1 - kept)}`,
          met: judge(ctx, kept >= 0.8),
        },
        spec: variant.spec,
        note: `${count} transactions per trial, four arms rotated per trial (outboxer with and without the option, plain SQL with and without it), medians of per-trial ratios; outboxer without the option ran at ${Math.round(median(t.plain)).toLocaleString('en-US')} txn/s. The same option costs plain SQL ${percent(1 - rawKept)}${variant.key === 'notify' ? `; a LISTEN connection received ${notifications.toLocaleString('en-US')} notifications` : ''}.`,
      });
    } finally {
      if (variant.key === 'notify') await listener.end();
    }
  }

  // 100 messages per transaction, one writer.
  {
    const perTxn = 100;
    const count = rows(settings, 200, 10);
    const outboxer = instance() as unknown as Outboxer<pg.PoolClient>;
    const multi = rawMultiInsert(perTxn);
    const t = await alternate(
      ctx,
      trials,
      async () =>
        perTxn *
        (await transactionsPerSecond(pool, 1, count, (client, n) =>
          outboxer.publishMany(
            client,
            Array.from({ length: perTxn }, (_, i) => ({
              outbox: 'bench',
              payload: payload(n * perTxn + i),
              groupKey: randomKey(),
            })),
          ),
        )),
      async () =>
        perTxn *
        (await transactionsPerSecond(pool, 1, count, (client, n) => {
          const values: unknown[] = [];
          for (let i = 0; i < perTxn; i += 1)
            values.push('bench', 0, randomKey(), null, JSON.stringify(payload(n * perTxn + i)), null);
          return client.query(multi, values);
        })),
    );
    const ours = median(t.ours);
    const raw = median(t.raw);
    ctx.figures.set('publish.100', ours);
    addRow(ctx, {
      group: 'Publish',
      what: 'Publish, 100 messages per transaction (1 writer)',
      ours: { value: ours, unit: 'msg/s' },
      limit: { label: 'multi-row INSERT … VALUES (100 rows)', figure: { value: raw, unit: 'msg/s' } },
      ofLimit: percent(pairedRatio(t)),
      target: {
        text: '≥ 80% of the limit',
        measured: percent(pairedRatio(t)),
        met: judge(ctx, pairedRatio(t) >= 0.8),
      },
      spec: '57,000 msg/s',
      note: `${count} transactions of ${perTxn} per trial; ${spread(t)}.`,
    });
  }
  await dropTables(pool, OURS);
  await dropTables(pool, RAW);
}
