/**
 * Every statement a dialect can produce, with values of every kind outboxer sends (arrays of
 * numbers, texts, booleans and nulls, dates, 'infinity'): the input of the placeholder tests.
 */
import type { Dialect, SqlQuery } from 'outboxer';

const table = { schema: 'app', name: 'outbox' };
const lease = { outbox: 'orders', partition: 3, owner: 'node-1', epoch: 7 };
const rebalance = { channel: 'outboxer', payload: 'app:orders:rebalance' };
const rows = [
  {
    outbox: 'orders',
    partition: 0,
    groupKey: 'order:1',
    type: 'created',
    payload: '{"a":"?"}',
    headers: null,
  },
  { outbox: 'orders', partition: 1, groupKey: null, type: null, payload: '"$1"', headers: '{"h":"v"}' },
];
const failed = [
  { id: 5, error: "it's down?", dead: false, delay: 1.5 },
  { id: 6, error: 'gone', dead: true, delay: 0 },
];

/** Named statements covering every method of the dialect and every branch that changes the SQL. */
export function dialectQueries(dialect: Dialect): Array<{ name: string; query: SqlQuery }> {
  const queries: Array<[string, SqlQuery | readonly SqlQuery[]]> = [
    ['schema', dialect.schema(table).map((text) => ({ text, values: [] }))],
    ['migrationLock', dialect.migrationLock()],
    ['insert one', dialect.insert(table, rows.slice(0, 1), { serialize: false, notify: undefined })],
    ['insert many', dialect.insert(table, rows, { serialize: false, notify: undefined })],
    [
      'insert serialized and notifying',
      dialect.insert(table, rows, {
        serialize: true,
        notify: { channel: 'outboxer', payloads: ['o:orders:0', 'o:orders:1'] },
      }),
    ],
    ...[false, true].flatMap((parkDead): Array<[string, SqlQuery | readonly SqlQuery[]]> => [
      ...(['group', 'total', 'none'] as const).flatMap((ordering): Array<[string, SqlQuery]> =>
        [null, new Date(0), 'infinity' as const].map((dueBefore) => [
          `poll ${ordering} due ${dueBefore instanceof Date ? 'date' : String(dueBefore)} parkDead=${parkDead}`,
          dialect.poll(table, {
            now: 1_700_000_000_000,
            lease,
            ordering,
            limit: 100,
            afterId: 10,
            dueBefore,
            parkDead,
          }),
        ]),
      ),
      [`hold parkDead=${parkDead}`, dialect.hold(table, lease, [1, 2], ['order:1'], parkDead)],
      ...[true, false].map((keep): [string, readonly SqlQuery[]] => [
        `settle keep=${keep} parkDead=${parkDead}`,
        dialect.settle(table, {
          now: 1_700_000_000_000,
          lease,
          delivered: [1, 2],
          failed,
          unblockedGroups: ['order:1'],
          keep,
          ttl: 30_000,
          parkDead,
        }),
      ]),
      ...(dialect.acknowledgeAndPoll === undefined
        ? []
        : [true, false].map((keep): [string, SqlQuery] => [
            `acknowledgeAndPoll keep=${keep} parkDead=${parkDead}`,
            dialect.acknowledgeAndPoll!(
              table,
              {
                now: 1_700_000_000_000,
                lease,
                delivered: [1, 2],
                failed: [],
                unblockedGroups: [],
                keep,
                ttl: 30_000,
                parkDead,
              },
              {
                now: 1_700_000_000_000,
                lease,
                ordering: 'group',
                limit: 100,
                afterId: 10,
                watch: { xids: ['731'], rewindTo: [4] },
                dueBefore: null,
                parkDead,
                exclude: [1, 2, 11, 12],
              },
            ),
          ])),
      [
        `retryDead all parkDead=${parkDead}`,
        dialect.retryDead(table, 'orders', undefined, parkDead, 1_700_000_000_000),
      ],
      [
        `retryDead ids parkDead=${parkDead}`,
        dialect.retryDead(table, 'orders', [1, 2], parkDead, 1_700_000_000_000),
      ],
      [`releaseOrphanedHolds parkDead=${parkDead}`, dialect.releaseOrphanedHolds(table, 'orders', parkDead)],
      [`blockedGroups parkDead=${parkDead}`, dialect.blockedGroups(table, 'orders', 100, parkDead)],
      [
        `blockedGroups prefix parkDead=${parkDead}`,
        dialect.blockedGroups(table, 'orders', 100, parkDead, false, 'order:'),
      ],
      [`blockedCounts parkDead=${parkDead}`, dialect.blockedCounts(table, 'orders', parkDead, 10_000)],
    ]),
    ['nextRetryAt', dialect.nextRetryAt(table, 'orders', 3)],
    [
      'acquireLease',
      dialect.acquireLease(table, {
        now: 1_700_000_000_000,
        outbox: 'orders',
        partition: 3,
        owner: 'node-1',
        ttl: 30_000,
      }),
    ],
    ['renewLease', dialect.renewLease(table, lease, 30_000, 1_700_000_000_000)],
    ['releaseLease', dialect.releaseLease(table, lease)],
    ['releaseLease notify', dialect.releaseLease(table, lease, rebalance)],
    ['heartbeat', dialect.heartbeat(table, 'orders', 'node-1', 30_000, 1_700_000_000_000)],
    [
      'heartbeat renewing',
      dialect.heartbeat(table, 'orders', 'node-1', 30_000, 1_700_000_000_000, {
        renew: [lease, { ...lease, partition: 1, epoch: 4 }],
        checkDue: true,
        recountEvery: 600_000,
        notify: rebalance,
      }),
    ],
    ['removeNode', dialect.removeNode(table, 'orders', 'node-1')],
    ['removeNode notify', dialect.removeNode(table, 'orders', 'node-1', rebalance)],
    ...(dialect.acquireLeases === undefined
      ? []
      : ([
          [
            'acquireLeases',
            dialect.acquireLeases(table, {
              now: 1_700_000_000_000,
              outbox: 'orders',
              partitions: [3, 1],
              owner: 'node-1',
              ttl: 30_000,
            }),
          ],
        ] as Array<[string, SqlQuery]>)),
    ...(dialect.leave === undefined
      ? []
      : ([['leave', dialect.leave(table, 'orders', 'node-1', [lease], rebalance)]] as Array<
          [string, SqlQuery]
        >)),
    ['counts', dialect.counts(table, 'orders', 4)],
    ['readConfiguration', dialect.readConfiguration(table, 'orders')],
    [
      'writeConfiguration',
      dialect.writeConfiguration(
        table,
        'orders',
        {
          partitions: 4,
          ordering: 'group',
          serializeWrites: true,
          onDead: 'continue',
        },
        1_700_000_000_000,
      ),
    ],
    ['serverVersion', dialect.serverVersion()],
    ['list pending', dialect.list(table, 'orders', 'pending', 100)],
    ['list dead', dialect.list(table, 'orders', 'dead', 100)],
    [
      'findMessages pending',
      dialect.findMessages(table, 'orders', { which: 'pending', afterId: 10, limit: 100, scan: 1000 }),
    ],
    [
      'findMessages dead filtered',
      dialect.findMessages(table, 'orders', {
        which: 'dead',
        afterId: 0,
        limit: 50,
        scan: 10_000,
        groupKey: 'order:1',
        type: 'created',
        error: "it's down?",
      }),
    ],
    ['partitions', dialect.partitions(table, 'orders', 4, 1_700_000_000_000)],
    ['nodes', dialect.nodes(table, 'orders', 30_000, 1_700_000_000_000)],
    ['discard', dialect.discard(table, 'orders', [1, 2])],
    ...(dialect.countRewind === undefined
      ? []
      : [['countRewind', dialect.countRewind(table, 'orders')] as [string, SqlQuery]]),
    ['prune', dialect.prune(table, 'orders', 3600, 1000, 1_700_000_000_000)],
    ...(dialect.tallies === undefined
      ? []
      : ([
          ['tallies.compact', dialect.tallies.compact(table, 'orders')],
          ['tallies.recount', dialect.tallies.recount(table, 'orders', 600_000)],
        ] as Array<[string, SqlQuery]>)),
  ];
  return queries.flatMap(([name, query]) =>
    Array.isArray(query) ? query.map((q, i) => ({ name: `${name} #${i + 1}`, query: q })) : [{ name, query }],
  );
}

/** The dialect methods {@link dialectQueries} covers; a test fails when the dialect grows one more. */
export const coveredMethods = [
  'schema',
  'acquireLeases',
  'leave',
  'migrationLock',
  'insert',
  'poll',
  'countRewind',
  'hold',
  'nextRetryAt',
  'settle',
  'acknowledgeAndPoll',
  'acquireLease',
  'renewLease',
  'releaseLease',
  'heartbeat',
  'removeNode',
  'counts',
  'readConfiguration',
  'writeConfiguration',
  'serverVersion',
  'list',
  'findMessages',
  'partitions',
  'nodes',
  'retryDead',
  'discard',
  'releaseOrphanedHolds',
  'blockedGroups',
  'blockedCounts',
  'prune',
  'missingSchemaObject',
  'isConflict', // reads an error, builds no SQL
];
