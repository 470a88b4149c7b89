/**
 * The dialects, exported as `postgresDialect` (outboxer/pg), `sqliteDialect`
 * (outboxer/better-sqlite3) and `mysqlDialect` (outboxer/mysql2), build every statement from a
 * table name that did not necessarily go through parseTableName: each method that takes one must refuse a hostile name itself
 * (INVALID_IDENTIFIER, from quoteName/checkedName), and no value it is given may land in the text.
 * Every method is listed: a new one fails the completeness test until it is covered here.
 */
import { describe, expect, test } from 'vitest';
import type { Dialect, SqlQuery } from 'outboxer';
import { sqliteDialect } from 'outboxer/better-sqlite3';
import { mysqlDialect } from 'outboxer/mysql2';
import { postgresDialect } from 'outboxer/pg';
import { BIGINT_NAME, expectRefusal, hostileIdentifiers } from './support.js';

type Table = Parameters<Dialect['list']>[0];

/** A value no statement text may contain. */
const V = "'); DROP TABLE victim; -- $1 ? $$";

const lease = { outbox: V, partition: 0, owner: V, epoch: 1 };
const poll = {
  lease,
  ordering: 'group' as const,
  limit: 10,
  afterId: 0,
  dueBefore: null,
  now: 1,
  parkDead: true,
  exclude: [1, 2],
  watch: { xids: ['1'], rewindTo: [0] },
  rewindsSeen: 0,
  checkPublishers: V,
};
const settle = {
  lease,
  delivered: [1],
  failed: [{ id: 2, error: V, dead: true, delay: 10 }],
  unblockedGroups: [V],
  keep: true,
  ttl: 1000,
  now: 1,
  parkDead: true,
};
const row = {
  outbox: V,
  partition: 0,
  groupKey: V,
  type: V,
  payload: JSON.stringify(V),
  headers: JSON.stringify({ h: V }),
};

/** Every method of a dialect that takes a table, called with `table` and the hostile value everywhere else. */
const CALLS: Record<
  string,
  (d: Dialect, t: Table) => ReadonlyArray<SqlQuery | string> | SqlQuery | string | undefined
> = {
  schema: (d, t) => d.schema(t),
  insert: (d, t) => d.insert(t, [row], { serialize: true, notify: { channel: V, payloads: [V] } }),
  insertMany: (d, t) =>
    d.insert(t, [row, row], { serialize: true, notify: { channel: V, payloads: [V, V] } }),
  poll: (d, t) => d.poll(t, poll),
  countRewind: (d, t) => d.countRewind?.(t, V),
  hold: (d, t) => d.hold(t, lease, [1], [V], true),
  nextRetryAt: (d, t) => d.nextRetryAt(t, V, 0),
  settle: (d, t) => d.settle(t, settle),
  acknowledgeAndPoll: (d, t) =>
    d.acknowledgeAndPoll?.(t, { ...settle, failed: [], unblockedGroups: [] }, poll),
  acquireLease: (d, t) => d.acquireLease(t, { outbox: V, partition: 0, owner: V, ttl: 1000, now: 1 }),
  acquireLeases: (d, t) =>
    d.acquireLeases?.(t, { outbox: V, partitions: [0, 1], owner: V, ttl: 1000, now: 1 }),
  renewLease: (d, t) => d.renewLease(t, lease, 1000, 1),
  releaseLease: (d, t) => d.releaseLease(t, lease),
  heartbeat: (d, t) => d.heartbeat(t, V, V, 1000, 1),
  heartbeatRenewing: (d, t) =>
    d.heartbeat(t, V, V, 1000, 1, {
      renew: [lease],
      checkDue: true,
      recountEvery: 1000,
      notify: { channel: V, payload: V },
    }),
  leave: (d, t) => d.leave?.(t, V, V, [lease], { channel: V, payload: V }),
  releaseLeaseNotifying: (d, t) => d.releaseLease(t, lease, { channel: V, payload: V }),
  removeNode: (d, t) => d.removeNode(t, V, V),
  counts: (d, t) => d.counts(t, V, 4, 100),
  'tallies.compact': (d, t) => d.tallies?.compact(t, V),
  'tallies.recount': (d, t) => d.tallies?.recount(t, V, 1000),
  readConfiguration: (d, t) => d.readConfiguration(t, V),
  writeConfiguration: (d, t) =>
    d.writeConfiguration(
      t,
      V,
      { partitions: 1, ordering: 'group', serializeWrites: false, onDead: 'park' },
      1,
      true,
    ),
  list: (d, t) => d.list(t, V, 'dead', 10),
  retryDead: (d, t) => d.retryDead(t, V, [1, 2], true, 1),
  retryDeadAll: (d, t) => d.retryDead(t, V, undefined, false, 1),
  discard: (d, t) => d.discard(t, V, [1, 2]),
  releaseOrphanedHolds: (d, t) => d.releaseOrphanedHolds(t, V, true),
  blockedGroups: (d, t) => d.blockedGroups(t, V, 10, true),
  blockedGroupsByPrefix: (d, t) => d.blockedGroups(t, V, 10, true, false, V),
  blockedCounts: (d, t) => d.blockedCounts(t, V, true, 100),
  findMessages: (d, t) =>
    d.findMessages(t, V, { which: 'dead', afterId: 0, limit: 10, scan: 100, groupKey: V, type: V, error: V }),
  partitions: (d, t) => d.partitions(t, V, 4, 1),
  nodes: (d, t) => d.nodes(t, V, 1000, 1),
  prune: (d, t) => d.prune(t, V, 60, 100, 1),
};

/** Methods that take no table: nothing of the caller's reaches their text. */
const TABLELESS = ['migrationLock', 'serverVersion', 'missingSchemaObject', 'isConflict'];

function texts(result: ReturnType<(typeof CALLS)[string]>): string[] {
  if (result === undefined) return [];
  return (Array.isArray(result) ? result : [result]).map((q) => (typeof q === 'string' ? q : q.text));
}

function values(result: ReturnType<(typeof CALLS)[string]>): unknown[] {
  if (result === undefined) return [];
  return (Array.isArray(result) ? result : [result]).flatMap((q) => (typeof q === 'string' ? [] : q.values));
}

describe.each([
  ['postgresDialect', postgresDialect],
  ['sqliteDialect', sqliteDialect],
  ['mysqlDialect', mysqlDialect],
])('%s', (_name, dialect) => {
  test('every method is covered', () => {
    const methods = Object.entries(dialect)
      .flatMap(([key, value]) =>
        typeof value === 'function'
          ? [key]
          : key === 'tallies' && value !== undefined
            ? Object.keys(value as object).map((k) => `tallies.${k}`)
            : [],
      )
      .filter((key) => !TABLELESS.includes(key));
    for (const method of methods) expect(Object.keys(CALLS), method).toContain(method);
  });

  test.each(Object.keys(CALLS))('%s refuses a hostile schema or table name', async (method) => {
    const call = CALLS[method]!;
    if (texts(call(dialect, { schema: 'app', name: 'msgs' })).length === 0) return; // not in this dialect
    for (const [label, value] of hostileIdentifiers()) {
      for (const table of [
        { schema: undefined, name: value },
        { schema: 'app', name: value },
        { schema: value, name: 'msgs' },
      ] as Table[]) {
        const what = `${method} ${label}`;
        if (typeof value === 'string' && /[^A-Za-z0-9_]/.test(value)) {
          // A character that is not plain: refused, whatever the method builds from the name.
          await expectRefusal(() => call(dialect, table), ['INVALID_IDENTIFIER'], what);
          continue;
        }
        // Plain characters but not a name ('', too long, a leading digit), or not a string at all:
        // refused, or what is quoted is a plain identifier all the same. (Statements on a companion
        // table check the companion's name, built by coercing the name: '' gives "_config", NaN
        // "NaN_config". Odd, but no SQL can get through.)
        try {
          for (const text of texts(call(dialect, table)))
            for (const [, name] of text.matchAll(/"([^"]*)"/g))
              expect(name, what).toMatch(/^[A-Za-z_][A-Za-z0-9_]{0,62}$/);
        } catch (error) {
          // A name that is not a string may also fail on its way to text (a Symbol: TypeError).
          if (typeof value === 'string')
            await expectRefusal(() => Promise.reject(error), ['INVALID_IDENTIFIER'], what);
          else expect(error, what).toBeInstanceOf(Error);
        }
      }
    }
  });

  test.each(Object.keys(CALLS))(
    '%s refuses a bigint schema or table name with INVALID_IDENTIFIER',
    async (method) => {
      const call = CALLS[method]!;
      if (texts(call(dialect, { schema: 'app', name: 'msgs' })).length === 0) return; // not in this dialect
      const schema = await expectRefusal(
        () => call(dialect, { schema: BIGINT_NAME, name: 'msgs' } as never),
        ['INVALID_IDENTIFIER'],
        `${method} schema 1n`,
      );
      expect(schema.message).toContain('1n');
      // A companion table's name is coerced first (1n gives "1_config"): refused all the same.
      await expectRefusal(
        () => call(dialect, { name: BIGINT_NAME } as never),
        ['INVALID_IDENTIFIER'],
        `${method} name 1n`,
      );
    },
  );

  test.each(Object.keys(CALLS))('%s keeps every value out of its text', (method) => {
    const result = CALLS[method]!(dialect, { schema: 'app', name: 'msgs' });
    for (const text of texts(result)) {
      expect(text).not.toContain('victim');
      expect(text).not.toContain(V);
    }
    const bound = JSON.stringify(values(result));
    if (texts(result).length > 0 && method !== 'schema') expect(bound, method).toContain('victim');
  });
});
