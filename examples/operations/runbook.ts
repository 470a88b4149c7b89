/**
 * The stuck-and-dead-message runbook with the API (docs/operations.md has the same with the CLI).
 * Manual testing mode stands in for the running relay, so that each step is visible; SQLite for
 * your database.
 *
 *   npx tsx examples/operations/runbook.ts
 */
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { Outboxer, PermanentError, functionRelay } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';

export async function main(): Promise<void> {
  const db = new Database(':memory:');
  let paymentsUp = false;
  const outboxer = new Outboxer({
    database: betterSqlite3(db),
    testing: 'manual',
    outboxes: {
      // Strict: a message that cannot be delivered holds its group, for at most a day.
      orders: {
        relay: functionRelay(async (m) => {
          if (m.type === 'order.v0') throw new PermanentError('schema v0 is not accepted any more');
          console.log(`orders: delivered #${m.id} (${m.groupKey})`);
        }),
        maxRetryDuration: 24 * 3600_000,
      },
      // Dead-letter after 3 attempts, and park the group behind the dead message.
      payments: {
        relay: functionRelay(async (m) => {
          if (!paymentsUp) throw new Error('503 from payments');
          console.log(`payments: delivered #${m.id} (${m.groupKey})`);
        }),
        maxAttempts: 3,
        onDead: 'park',
      },
    },
  });
  await outboxer.migrate();
  db.transaction(() => {
    outboxer.publish(db, 'orders', { orderId: 42 }, { groupKey: 'order:42', type: 'order.v0' });
    outboxer.publish(db, 'orders', { orderId: 42 }, { groupKey: 'order:42', type: 'order.paid' });
    outboxer.publish(db, 'orders', { orderId: 7 }, { groupKey: 'order:7', type: 'order.paid' });
    outboxer.publish(db, 'payments', { paymentId: 9 }, { groupKey: 'payment:9' });
    outboxer.publish(db, 'payments', { paymentId: 9 }, { groupKey: 'payment:9' });
  })();
  await outboxer.drain(undefined, { maxRounds: 3 }); // the relay at work: order:7 goes out

  // 1. A group is blocked: which message holds it back, since when, and why?
  for (const group of await outboxer.blockedGroups('orders')) {
    console.log(
      `orders: ${group.groupKey} blocked by #${group.headId} after ${group.attempts} attempts, ${group.waiting} waiting: ${group.lastError}`,
    );
  }
  // It can never be delivered: remove it, and the group moves on.
  const [stuck] = await outboxer.blockedGroups('orders');
  await outboxer.discard('orders', [stuck!.headId]);
  await outboxer.drain('orders');

  // 2. Messages are dead (and, with onDead: 'park', their group waits behind them).
  const dead = await outboxer.listDead('payments');
  for (const message of dead) {
    console.log(`payments: #${message.id} dead after ${message.attempts} attempts: ${message.lastError}`);
  }
  // The cause is fixed: send them again, first in their group.
  paymentsUp = true;
  await outboxer.retryDead('payments', { ids: dead.map((m) => m.id) });
  await outboxer.drain('payments');

  console.log(JSON.stringify(await outboxer.counts('payments'), ['pending', 'dead']));
  await outboxer.close();
  db.close();
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
