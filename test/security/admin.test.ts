/**
 * The admin API with hostile values: outbox names that are not configured (UNKNOWN_OUTBOX), and
 * limits, `upTo` and ids that are not what they should be (INVALID_OPTIONS), each refused before
 * any statement is sent. And outbox names that look like SQL but are allowed: they are values,
 * which change none of the statements' texts.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, functionRelay, type DatabaseAdapter, type ErrorCode, type OutboxOptions } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { nodePostgres } from 'outboxer/pg';
import { recordingAdapter } from '../reliability/support.js';
import {
  CANARY,
  HOSTILE_VALUES,
  expectRefusal,
  hostileIdentifiers,
  isTransactionControl,
  postgresScratch,
  sqliteScratch,
  type LoggedStatement,
  inPgTransaction,
} from './support.js';

type Instance = Outboxer<never, boolean>;

const HOSTILE_NUMBERS: unknown[] = [
  '1; DROP TABLE victim',
  '10',
  '1e3',
  NaN,
  Infinity,
  -Infinity,
  1e300,
  2 ** 63,
  -1,
  0,
  1.5,
  null,
  true,
  {},
  [10],
  10n,
  new Number(10),
  { valueOf: () => 10 },
];

const HOSTILE_IDS: unknown[] = [
  ['1; DROP TABLE victim'],
  '1; DROP TABLE victim',
  '1,2',
  ...[NaN, Infinity, 1e300, 2 ** 63, -1, 0, 1.5, '1', 1n, null, {}, [1], true].map((id) => [1, id]),
  { length: 1, 0: 1 },
  null,
  42,
  Array.from({ length: 10_001 }, (_, i) => i + 1),
];

/** Each hostile ids value with a short label (a bigint shown as `1n`). */
const ID_CASES = HOSTILE_IDS.map((ids) => [
  JSON.stringify(ids, (_key, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x))?.slice(0, 50),
  ids,
]);

describe.each(['Postgres', 'SQLite'])('the admin API on %s', (name) => {
  let database: DatabaseAdapter;
  let statements: () => LoggedStatement[];
  let canary: () => Promise<unknown>;
  let close: () => Promise<void>;
  let recorded: ReturnType<typeof recordingAdapter>;
  let outboxer: Instance;
  let transaction: (fn: (tx: never) => unknown) => Promise<void>;
  const relay = functionRelay(async (m) => {
    if (String(m.payload).startsWith('poison')) throw new Error('refused');
  });
  const options: OutboxOptions = { relay, table: 'admin_msgs', maxAttempts: 1, retention: { keep: 60 } };
  const instance = (extra: Record<string, OutboxOptions> = {}): Instance =>
    new Outboxer({
      database: recorded.adapter,
      testing: 'manual',
      outboxes: { orders: options, ...extra },
    }) as Instance;

  beforeAll(async () => {
    if (name === 'Postgres') {
      const scratch = await postgresScratch();
      const pool = new pg.Pool({ connectionString: scratch.url, max: 2 });
      database = nodePostgres(pool) as DatabaseAdapter;
      statements = () => scratch.wire.statements;
      canary = () => scratch.canary();
      transaction = (fn) => inPgTransaction(pool, fn);
      close = async () => {
        await pool.end();
        await scratch.close();
      };
    } else {
      const scratch = sqliteScratch();
      const db = new Database(scratch.file);
      database = betterSqlite3(db) as DatabaseAdapter;
      statements = scratch.statements;
      canary = async () => scratch.canary();
      transaction = async (fn) => db.transaction(() => void fn(db as never))();
      close = async () => {
        db.close();
        scratch.close();
      };
    }
    recorded = recordingAdapter(database);
    recorded.recording.on = true;
    outboxer = instance();
    await outboxer.migrate();
    await transaction((tx) =>
      outboxer.publishMany(tx, [
        { outbox: 'orders', payload: 'ok', groupKey: 'g' },
        { outbox: 'orders', payload: 'poison', groupKey: 'h' },
      ]),
    );
    await outboxer.drain('orders');
    expect(await outboxer.counts('orders')).toMatchObject({ delivered: 1, dead: 1 });
  });

  afterAll(async () => {
    let victim: unknown;
    try {
      victim = await canary();
    } finally {
      await outboxer.close();
      await close();
    }
    expect(victim).toEqual(CANARY);
  });

  /** Runs `fn` and asserts it was refused with `code` and that not one statement was sent. */
  async function refusedSilently(fn: () => unknown, code: ErrorCode, what: string): Promise<void> {
    const adapterCalls = recorded.texts.length;
    const sent = statements().length;
    await expectRefusal(fn, [code], what);
    expect(recorded.texts.slice(adapterCalls), `${what}: statements the engine sent`).toEqual([]);
    // The test's own BEGIN and ROLLBACK around a publish aside.
    const received = statements()
      .slice(sent)
      .filter((s) => !isTransactionControl(s.text));
    expect(received, `${what}: statements the database received`).toEqual([]);
  }

  const unknownNames: Array<[string, unknown]> = [
    ...hostileIdentifiers(),
    ...HOSTILE_VALUES.map((v): [string, unknown] => [JSON.stringify(v), v]),
    ...[
      '__proto__',
      'constructor',
      'toString',
      'hasOwnProperty',
      'Orders',
      ' orders',
      'orders\0',
      'orders;',
    ].map((v): [string, unknown] => [JSON.stringify(v), v]),
  ];

  test.each(unknownNames)(
    'an outbox named %s is unknown to every call, and nothing runs',
    async (label, value) => {
      const o = value as string;
      const calls: Array<[string, () => unknown]> = [
        ['counts', () => outboxer.counts(o)],
        ['listPending', () => outboxer.listPending(o)],
        ['listDead', () => outboxer.listDead(o)],
        ['blockedGroups', () => outboxer.blockedGroups(o)],
        ['retryDead', () => outboxer.retryDead(o)],
        ['retryDead with ids', () => outboxer.retryDead(o, { ids: [1] })],
        ['discard', () => outboxer.discard(o, [1])],
        ['prune', () => outboxer.prune(o)],
        ['drain', () => outboxer.drain(o)],
        ['outbox', () => outboxer.outbox(o)],
        ['publish', () => transaction((tx) => outboxer.publish(tx, o, { n: 1 }))],
        ['publishMany', () => transaction((tx) => outboxer.publishMany(tx, [{ outbox: o, payload: 1 }]))],
      ];
      for (const [call, fn] of calls) await refusedSilently(fn, 'UNKNOWN_OUTBOX', `${call}(${label})`);
    },
  );

  test.each(HOSTILE_NUMBERS.map((v) => [String(v), v]))(
    'limit %s is refused, and nothing runs',
    async (label, limit) => {
      const l = limit as number;
      await refusedSilently(
        () => outboxer.listPending('orders', { limit: l }),
        'INVALID_OPTIONS',
        `listPending ${label}`,
      );
      await refusedSilently(
        () => outboxer.listDead('orders', { limit: l }),
        'INVALID_OPTIONS',
        `listDead ${label}`,
      );
      await refusedSilently(
        () => outboxer.blockedGroups('orders', { limit: l }),
        'INVALID_OPTIONS',
        `blockedGroups ${label}`,
      );
      await refusedSilently(
        () => outboxer.counts('orders', { upTo: l }),
        'INVALID_OPTIONS',
        `counts upTo ${label}`,
      );
    },
  );

  test('limits past the bound are refused too: 10,001 rows', async () => {
    for (const list of ['listPending', 'listDead', 'blockedGroups'] as const)
      await refusedSilently(() => outboxer[list]('orders', { limit: 10_001 }), 'INVALID_OPTIONS', list);
  });

  test.each(ID_CASES)('retryDead ids %s are refused, and nothing runs', async (label, ids) => {
    await refusedSilently(
      () => outboxer.retryDead('orders', { ids: ids as number[] }),
      'INVALID_OPTIONS',
      `retryDead ${label}`,
    );
  });

  test.each(ID_CASES)('discard ids %s are refused, and nothing runs', async (label, ids) => {
    await refusedSilently(
      () => outboxer.discard('orders', ids as number[]),
      'INVALID_OPTIONS',
      `discard ${label}`,
    );
  });

  // The ids are checked before the configuration is read: a fresh instance sends nothing either.
  test.each(ID_CASES)(
    'ids %s are refused by the first retryDead() or discard() of an instance, and nothing runs',
    async (label, ids) => {
      await refusedSilently(
        () => instance().retryDead('orders', { ids: ids as number[] }),
        'INVALID_OPTIONS',
        `first retryDead ${label}`,
      );
      await refusedSilently(
        () => instance().discard('orders', ids as number[]),
        'INVALID_OPTIONS',
        `first discard ${label}`,
      );
    },
  );

  // A hole of a sparse array is not an id: it is refused, not bound as NULL.
  test('sparse id arrays are refused, and nothing runs', async () => {
    for (const ids of [new Array(3), [999_998, , 999_999], [1, 2, ,]] as number[][]) {
      await refusedSilently(
        () => outboxer.retryDead('orders', { ids }),
        'INVALID_OPTIONS',
        'retryDead sparse',
      );
      await refusedSilently(() => outboxer.discard('orders', ids), 'INVALID_OPTIONS', 'discard sparse');
      await refusedSilently(
        () => instance().discard('orders', ids),
        'INVALID_OPTIONS',
        'first discard sparse',
      );
    }
  });

  test('outbox names that look like SQL but are allowed are values: the statements keep their text', async () => {
    const names = ['--', '.', '..-', 'a.b-c_', '0', '-1', '_.--.-'];
    const multi = instance(Object.fromEntries(names.map((n) => [n, options])));
    const textsOf = async (outbox: string, payload: string) => {
      const from = recorded.texts.length;
      await transaction((tx) => multi.publish(tx, outbox, payload, { groupKey: outbox }));
      const [pending] = await multi.listPending(outbox);
      expect(pending).toMatchObject({ outbox, payload, groupKey: outbox });
      await multi.counts(outbox);
      await multi.retryDead(outbox);
      await multi.discard(outbox, [pending!.id]);
      return recorded.texts.slice(from);
    };
    const plain = await textsOf('orders', 'plain');
    for (const outbox of names) expect(await textsOf(outbox, `to ${outbox}`), outbox).toEqual(plain);
  });
});
