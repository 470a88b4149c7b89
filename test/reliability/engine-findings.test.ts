/**
 * Engine bugs found by the reliability work, each as the smallest reproduction of what went wrong;
 * all fixed, so each is now a regression test of the correct behaviour. docs/reliability.md lists
 * them.
 */
import { describe, expect, test } from 'vitest';
import Database from 'better-sqlite3';
import { Outboxer, functionRelay, isOutboxerError } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { DATABASE_URL, postgresFixture, sqliteFixture } from '../support/databases.js';
import { sleep, waitUntil } from '../support/random.js';
import { relayingBehindProxy, runProcess } from './support.js';

describe('engine findings', () => {
  // 1. The pg adapter's executeAtomically() (settle, heartbeat, prune) checks a client out of the
  // pool and attaches no 'error' listener to it. When the connection dies inside that transaction
  // (Postgres restarted, pg_terminate_backend, a pooler or the network cutting it), the statement
  // fails, which the engine handles, and then pg emits 'error' on the still checked-out client:
  // an unhandled 'error' event, and the whole application process exits. The chaos run hit it on
  // every Postgres restart until its relays added the workaround
  // `pool.on('connect', (c) => c.on('error', () => {}))`. Fix: attach a listener for the time the
  // client is checked out, as pg-pool's own pool.query() does.
  test('a relay process survives its connection dying inside a settle transaction', async () => {
    const result = await runProcess('terminated-transaction.ts', [DATABASE_URL]);
    expect(result.output).toContain('survived');
    expect(result.code).toBe(0);
  });

  // 2. On SQLite the settle sends the failed messages as one JSON parameter, and JSON.stringify()
  // serialises the whole failure, the relay's raw error included. An error with a circular
  // reference (an axios or http error holding its request), or a BigInt in it, makes the settle
  // throw: nothing of the batch is acknowledged, the delivered messages are delivered again and
  // again, and the failing one never counts an attempt, so it never goes dead. The partition
  // stalls for good.
  test('SQLite: a relay error with a circular reference is recorded, and the rest of the batch acknowledged', async () => {
    const db = new Database(':memory:');
    let sends = 0;
    const outboxer = new Outboxer({
      database: betterSqlite3(db),
      outboxes: {
        orders: {
          pollInterval: 20,
          maxAttempts: 3,
          backoff: { min: 10, max: 10 },
          relay: functionRelay(async (message) => {
            sends += 1;
            if (message.groupKey === 'bad') {
              const request: Record<string, unknown> = {};
              request.self = request;
              throw Object.assign(new Error('HTTP 500'), { request });
            }
          }),
        },
      },
    });
    await outboxer.migrate();
    db.transaction(() => {
      outboxer.publish(db, 'orders', { n: 1 }, { groupKey: 'good' });
      outboxer.publish(db, 'orders', { n: 2 }, { groupKey: 'bad' });
    })();
    await outboxer.start();
    await sleep(1000);
    const counts = await outboxer.counts('orders');
    await outboxer.stop();
    db.close();
    expect(counts).toMatchObject({ pending: 0, dead: 1 }); // 'good' delivered once, 'bad' dead after 3
    expect(sends).toBe(4);
  });

  // 3. A relay error whose message cannot be read (a getter that throws) makes describeError()
  // throw inside planSettlement: the round fails before anything is settled, on every dialect.
  // Same consequences as 2: the partition stalls, its delivered messages are delivered again.
  test('a relay error whose message getter throws is recorded, not fatal to the round', async () => {
    const fixture = await postgresFixture();
    class Unreadable extends Error {
      override get message(): string {
        throw new Error('no message');
      }
    }
    try {
      const outboxer = new Outboxer({
        database: fixture.database,
        testing: 'manual',
        outboxes: {
          orders: {
            relay: functionRelay(async () => {
              throw new Unreadable();
            }),
          },
        },
      });
      await outboxer.migrate();
      await fixture.transaction((tx) => outboxer.publish(tx as never, 'orders', {}) as Promise<number>);
      const result = await outboxer.drain('orders', { maxRounds: 1 });
      expect(result.retried).toHaveLength(1);
    } finally {
      await fixture.close();
    }
  });

  // 4. A payload whose toJSON() throws something that is not an Error (undefined, null) escapes
  // encodeJson() as a TypeError ("Cannot read properties of undefined (reading 'message')")
  // instead of PAYLOAD_NOT_ENCODABLE.
  test.each([undefined, null])(
    'a payload whose toJSON throws %s is refused with PAYLOAD_NOT_ENCODABLE',
    async (value) => {
      const { db, database, close } = sqliteFixture();
      const outboxer = new Outboxer({ database, relay: false, outboxes: { orders: {} } });
      await outboxer.migrate();
      let thrown: unknown;
      db.transaction(() => {
        try {
          outboxer.publish(db as never, 'orders', {
            toJSON() {
              throw value;
            },
          });
        } catch (error) {
          thrown = error;
        }
      })();
      await close();
      expect(isOutboxerError(thrown) && thrown.code).toBe('PAYLOAD_NOT_ENCODABLE');
    },
  );

  // 5. The logger option is checked for an error() method only; one without warn() is accepted,
  // and counts() (or a worker) later throws TypeError: this.logger.warn is not a function.
  test('a logger without warn() is refused when the instance is built', async () => {
    const { db, database, close } = sqliteFixture();
    let thrown: unknown;
    try {
      const outboxer = new Outboxer({
        database,
        relay: false,
        logger: { error: () => undefined } as never,
        outboxes: { orders: {} },
      });
      await outboxer.migrate();
      db.transaction(() => outboxer.publish(db as never, 'orders', {}))();
      await outboxer.counts('orders'); // pending and no relay seen: it warns
    } catch (error) {
      thrown = error;
    }
    await close();
    expect(isOutboxerError(thrown) && thrown.code).toBe('INVALID_OPTIONS');
  });

  // 6. stop() never returns while the database hangs (a network partition that drops packets, a
  // frozen server, a stuck pooler): shutdownTimeout bounds the batches in flight, but stop() then
  // awaits the coordinator's tick in progress, hands the leases back and closes the listener,
  // each a query or a socket end with no time limit. A SIGTERM handler that awaits stop() before
  // process.exit() never exits; the orchestrator's SIGKILL ends it. Fix: bound every step of
  // stop() by shutdownTimeout (the leases lapse on their own) and destroy the listener's socket.
  test('stop() returns within shutdownTimeout plus a margin while the database hangs', async () => {
    const fixture = await postgresFixture();
    const { proxy, pool, outboxer } = await relayingBehindProxy(fixture.schema);
    let outcome = 'hung';
    try {
      await outboxer.migrate();
      await outboxer.start();
      await sleep(300);
      proxy.set('blackhole');
      outcome = await Promise.race([outboxer.stop().then(() => 'stopped'), sleep(10_000).then(() => 'hung')]);
    } finally {
      proxy.set('down'); // cut the hung connections so that everything can end
      await outboxer.stop().catch(() => undefined);
      await pool.end().catch(() => undefined);
      await proxy.close();
      await fixture.close();
    }
    expect(outcome).toBe('stopped');
  }, 60_000);

  // 8. SQLite: describeError() does not make the text well-formed, and better-sqlite3 stores a
  // lone surrogate of an error message as three bytes of invalid UTF-8, which read back as three
  // U+FFFD: lastError holds invalid UTF-8 and can be longer than maxErrorLength. (Postgres gets
  // U+FFFD from node-postgres.) Fix: String.prototype.toWellFormed() in describeError().
  test('SQLite: lastError stays within maxErrorLength and valid UTF-8 with a lone surrogate in the error', async () => {
    const { db, database, close } = sqliteFixture();
    const outboxer = new Outboxer({
      database,
      testing: 'manual',
      maxErrorLength: 100,
      outboxes: {
        orders: {
          relay: functionRelay(async () => {
            throw new Error('\uD83D'.repeat(10) + 'x'.repeat(500));
          }),
        },
      },
    });
    await outboxer.migrate();
    db.transaction(() => outboxer.publish(db as never, 'orders', {}))();
    await outboxer.drain('orders', { maxRounds: 1 });
    const [row] = db
      .prepare('SELECT last_error, hex(last_error) AS hex FROM outboxer_messages')
      .all() as Array<{
      last_error: string;
      hex: string;
    }>;
    await close();
    expect(row!.hex).not.toContain('EDA0BD'); // the UTF-8 bytes of a lone U+D83D
    expect(row!.last_error.length).toBeLessThanOrEqual(100);
  });

  // 9. A round that fails after its poll (a settle or a hold statement cut by a database restart)
  // leaves the poll cursor past rows it neither delivered, held nor rewound to. The failed round
  // backs off, but a NOTIFY wake-up cuts the backoff short, and the next poll starts past those
  // rows: a later message of their group, not blocked by anything, is delivered first. Found by
  // the chaos run (seed 8: 40 order violations, only in the notify outboxes, right after a
  // destination outage left full batches and a Postgres restart failed a settle). Here the settle
  // is made to fail once by the adapter, as a cut connection would. Fixed: the worker restarts
  // its cursor when a round fails.
  test('a failed settle followed by a NOTIFY wake-up does not deliver a later message of the group first', async () => {
    const fixture = await postgresFixture();
    let failSettle = true;
    const database = {
      ...fixture.database,
      async executeAtomically(queries: readonly { text: string; values: readonly unknown[] }[]) {
        if (failSettle && queries.some((q) => q.text.includes('attempts = m.attempts + 1'))) {
          failSettle = false;
          throw new Error('Connection terminated unexpectedly');
        }
        return fixture.database.executeAtomically(queries);
      },
    } as typeof fixture.database;
    const delivered: string[] = [];
    const outboxer = new Outboxer({
      database,
      outboxes: {
        orders: {
          notify: true,
          batchSize: 2,
          pollInterval: 60_000,
          backoff: { min: 10, max: 10 },
          relay: functionRelay(async (message) => {
            const { name } = message.payload as { name: string };
            if (name === 'g1' && message.attempts === 0) throw new Error('destination refused it');
            delivered.push(name);
          }),
        },
      },
    });
    try {
      await outboxer.migrate();
      await fixture.transaction(async (tx) => {
        await outboxer.publish(tx as never, 'orders', { name: 'g1' }, { groupKey: 'g' });
        await outboxer.publish(tx as never, 'orders', { name: 'x1' }, { groupKey: 'x' });
      });
      await outboxer.start();
      await waitUntil(() => delivered.includes('x1') && !failSettle, 20_000, 'the first round');
      // A later message of group g: its NOTIFY wakes the worker out of its backoff.
      await fixture.transaction(
        (tx) => outboxer.publish(tx as never, 'orders', { name: 'g2' }, { groupKey: 'g' }) as Promise<number>,
      );
      await waitUntil(() => delivered.includes('g1') && delivered.includes('g2'), 20_000, 'g1 and g2');
    } finally {
      await outboxer.stop();
      await fixture.close();
    }
    expect(delivered.filter((name) => name.startsWith('g'))).toEqual(['g1', 'g2']);
  }, 60_000);
});
