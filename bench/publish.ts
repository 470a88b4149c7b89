/**
 * Publish rows: outboxer's publish inside a transaction against the same INSERT written by hand,
 * into identical tables (outboxer's own DDL), at the same number of writers, in alternating trials.
 * The plain side is each database's own SQL (`db.plain`, in bench/postgres.ts and bench/mysql.ts).
 */
import { Outboxer, type OutboxOptions, type SqlQuery } from 'outboxer';
import { addRow, judge, type BenchContext } from './context.js';
import { transactionsPerSecond, type BenchConnection, type BenchDatabase } from './database.js';
import { percent } from './report.js';
import { groupKey, median, payload, rows } from './support.js';

const OURS = 'bench_pub';
const RAW = 'bench_pub_raw';
const GROUPS = 10_000;

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
      await ctx.db.truncate([OURS, RAW]);
      await ctx.db.checkpoint();
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

/** Runs a plain side's statements one after another on the writer's connection. */
async function runAll(connection: BenchConnection<unknown>, queries: readonly SqlQuery[]): Promise<void> {
  for (const query of queries) await connection.query(query.text, query.values);
}

export async function publishRows<Tx>(ctx: BenchContext<BenchDatabase<Tx>>): Promise<void> {
  const { db, settings } = ctx;
  const trials = settings.quick ? 1 : 7;
  await db.dropTables(OURS);
  await db.dropTables(RAW);
  const instance = (options: Partial<OutboxOptions> = {}, table = OURS) =>
    new Outboxer({
      database: db.adapter(),
      relay: false,
      outboxes: { bench: { table, ...options } },
    });
  // Identical tables and indexes: outboxer's own DDL for both.
  await instance().migrate();
  await instance({}, RAW).migrate();

  const publishOne = (outboxer: Outboxer<Tx>) => (connection: BenchConnection<Tx>, n: number) =>
    outboxer.publish(connection.tx, 'bench', payload(n), { groupKey: randomKey() });
  const rawOne =
    (statements: (table: string, row: readonly unknown[]) => SqlQuery[]) =>
    (connection: BenchConnection<Tx>, n: number) =>
      runAll(connection, statements(RAW, ['bench', 0, randomKey(), null, JSON.stringify(payload(n)), null]));

  // 1 and 10 writers, one message per transaction.
  for (const writers of [1, 10]) {
    // Ten writers commit in a fraction of a second: longer trials keep one slow flush from deciding one.
    const count = writers === 1 ? rows(settings, 700, 40) : rows(settings, 5000, 100);
    const outboxer = instance();
    const t = await alternate(
      ctx,
      trials,
      () => transactionsPerSecond(db, writers, count, publishOne(outboxer)),
      () => transactionsPerSecond(db, writers, count, rawOne(db.plain.insert)),
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

  // notify (where the database has it) and serializeWrites at 10 writers: their cost against the
  // plain row just measured, and the same lock or notification in plain SQL against the plain INSERT.
  const { notified, locked } = db.plain;
  const variants = [
    ...(notified !== undefined && db.dialect.capabilities.notifications
      ? [
          {
            what: 'Same with `notify: true` (10 writers)',
            options: { notify: true },
            plain: notified,
            spec: '3,500 txn/s',
            key: 'notify',
          },
        ]
      : []),
    {
      what: 'Same with `serializeWrites: true` (10 writers)',
      options: { serializeWrites: true },
      plain: locked,
      spec: '3,700 txn/s',
      key: 'serialize',
    },
  ];
  for (const variant of variants) {
    const count = rows(settings, 2500, 100);
    const plainOutboxer = instance();
    const outboxer = instance(variant.options);
    // A relay node LISTENs in real life: Postgres only signals backends that listen.
    const listener = variant.key === 'notify' ? await db.listen?.('outboxer') : undefined;
    try {
      // Four arms per trial: outboxer with and without the option, plain SQL with and without it.
      const t = await rotate(ctx, settings.quick ? 1 : 5, {
        plain: () => transactionsPerSecond(db, 10, count, publishOne(plainOutboxer)),
        ours: () => transactionsPerSecond(db, 10, count, publishOne(outboxer)),
        raw: () => transactionsPerSecond(db, 10, count, rawOne(variant.plain.insert)),
        rawPlain: () => transactionsPerSecond(db, 10, count, rawOne(db.plain.insert)),
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
        limit: { label: variant.plain.label, figure: { value: raw, unit: 'txn/s' } },
        ofLimit: percent(paired(t.ours, t.raw)),
        target: {
          text: 'costs ≤ 20% (against outboxer without it, same trials)',
          measured: `costs ${percent(1 - kept)}`,
          met: judge(ctx, kept >= 0.8),
        },
        spec: variant.spec,
        note: `${count} transactions per trial, four arms rotated per trial (outboxer with and without the option, plain SQL with and without it), medians of per-trial ratios; outboxer without the option ran at ${Math.round(median(t.plain)).toLocaleString('en-US')} txn/s. The same option costs plain SQL ${percent(1 - rawKept)}${listener ? `; a LISTEN connection received ${listener.received().toLocaleString('en-US')} notifications` : ''}.`,
      });
    } finally {
      await listener?.close();
    }
  }

  // 100 messages per transaction, one writer.
  {
    const perTxn = 100;
    const count = rows(settings, 200, 10);
    const outboxer = instance();
    const t = await alternate(
      ctx,
      trials,
      async () =>
        perTxn *
        (await transactionsPerSecond(db, 1, count, (connection, n) =>
          outboxer.publishMany(
            connection.tx,
            Array.from({ length: perTxn }, (_, i) => ({
              outbox: 'bench',
              payload: payload(n * perTxn + i),
              groupKey: randomKey(),
            })),
          ),
        )),
      async () =>
        perTxn *
        (await transactionsPerSecond(db, 1, count, (connection, n) => {
          const values = Array.from({ length: perTxn }, (_, i) => [
            'bench',
            0,
            randomKey(),
            null,
            JSON.stringify(payload(n * perTxn + i)),
            null,
          ]);
          return runAll(connection, db.plain.insertMany(RAW, values));
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
  await db.dropTables(OURS);
  await db.dropTables(RAW);
}
