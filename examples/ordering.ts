/**
 * Order per group, and what one failing message does in a strict outbox and in a dead-letter one.
 * SQLite in memory, manual testing mode (drain() delivers, retries without waiting): no server.
 *
 *   npx tsx examples/ordering.ts
 */
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { Outboxer, functionRelay, type Envelope } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';

type OrderEvent = { orderId: number; step: string };
const label = (m: Envelope) => `${m.groupKey} ${(m.payload as OrderEvent).step}`;

export async function main(print: (line: string) => void = console.log) {
  const db = new Database(':memory:');
  let billingFixed = false;
  const received: Record<string, string[]> = { strict: [], deadLetter: [] };
  // The billing service refuses order 1's payment until it is fixed; everything else goes through.
  const relay = functionRelay(async (message: Envelope) => {
    const { orderId, step } = message.payload as OrderEvent;
    if (orderId === 1 && step === 'paid' && !billingFixed) throw new Error('billing refused the payment');
    received[message.outbox]!.push(label(message));
  });
  const outboxer = new Outboxer({
    database: betterSqlite3(db),
    outboxes: {
      strict: { relay }, // maxAttempts: Infinity (the default): retried until it goes through
      deadLetter: { relay, maxAttempts: 3 }, // dead after 3 failures, and its group moves on
    },
    testing: 'manual',
  });
  await outboxer.migrate();

  // The same six events in each outbox; each order is a group: its events stay in sequence.
  db.transaction(() => {
    for (const outbox of ['strict', 'deadLetter'])
      for (const orderId of [1, 2])
        for (const step of ['placed', 'paid', 'shipped'])
          outboxer.publish(db, outbox, { orderId, step }, { groupKey: `order:${orderId}` });
  })();

  await outboxer.drain(undefined, { maxRounds: 5 });
  // strict: order:1 paid is still pending (5 failed attempts) and order:1 shipped waits behind it.
  // deadLetter: order:1 paid is dead after 3 failures, and order:1 shipped went out without it.
  for (const outbox of ['strict', 'deadLetter']) {
    const pending = await outboxer.listPending(outbox);
    const dead = await outboxer.listDead(outbox);
    print(`${outbox}: delivered ${received[outbox]!.join(', ')}`);
    print(`  pending: ${pending.map((m) => `${label(m)} (${m.attempts} failures)`).join(', ') || 'none'}`);
    print(`  dead: ${dead.map((m) => `${label(m)} (${m.lastError})`).join(', ') || 'none'}`);
  }

  billingFixed = true;
  await outboxer.retryDead('deadLetter'); // revived with its id; sent now, after order:1 shipped
  await outboxer.drain();
  for (const outbox of ['strict', 'deadLetter'])
    print(`${outbox}, in the end: ${received[outbox]!.join(', ')}`);

  const counts = { strict: await outboxer.counts('strict'), deadLetter: await outboxer.counts('deadLetter') };
  await outboxer.close();
  db.close();
  return { received, counts };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
