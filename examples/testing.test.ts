/**
 * The example of docs/testing.md: how an application tests its own code that publishes.
 * It runs as written (the docs show this file).
 */
import Database from 'better-sqlite3';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { Outboxer, defineMessage, functionRelay, type Envelope } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';

// --- the application under test ---------------------------------------------------------------
const UserSignedUp = defineMessage<{ userId: number; email: string }>({
  outbox: 'users',
  type: 'UserSignedUp',
  groupKey: (event) => `user:${event.userId}`,
});

function signUp(db: Database.Database, outboxer: Outboxer<Database.Database, true>, email: string): number {
  return db.transaction(() => {
    const { lastInsertRowid } = db.prepare('INSERT INTO users (email) VALUES (?)').run(email);
    const userId = Number(lastInsertRowid);
    outboxer.publish(db, UserSignedUp({ userId, email }));
    return userId;
  })();
}

// --- the test --------------------------------------------------------------------------------
let db: Database.Database;
let outboxer: Outboxer<Database.Database, true>;
const sentEmails: Envelope[] = [];

beforeEach(async () => {
  db = new Database(':memory:');
  db.exec('CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT UNIQUE NOT NULL)');
  outboxer = new Outboxer({
    database: betterSqlite3(db),
    // The real relay of the application would go here; this one records what it was given.
    outboxes: { users: { relay: functionRelay(async (event) => void sentEmails.push(event)) } },
    testing: 'manual', // no background workers: the test decides when messages go out
  });
  await outboxer.migrate();
  sentEmails.length = 0;
});

afterEach(async () => {
  await outboxer.close();
  db.close();
});

test('signing up publishes UserSignedUp, delivered by drain()', async () => {
  const userId = signUp(db, outboxer, 'ada@example.com');
  expect(sentEmails).toEqual([]); // nothing is delivered until drain()

  const result = await outboxer.drain();

  expect(result.delivered).toHaveLength(1);
  expect(sentEmails[0]).toMatchObject({
    type: 'UserSignedUp',
    groupKey: `user:${userId}`,
    payload: { userId, email: 'ada@example.com' },
  });
  expect(await outboxer.counts('users')).toMatchObject({ pending: 0, delivered: 0, dead: 0 });
});

test('a failed sign-up publishes nothing', async () => {
  signUp(db, outboxer, 'ada@example.com');
  expect(() => signUp(db, outboxer, 'ada@example.com')).toThrow(/UNIQUE/);

  const result = await outboxer.drain();
  expect(result.delivered).toHaveLength(1);
});
