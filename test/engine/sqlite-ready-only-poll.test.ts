/**
 * SQLite's ready-only poll (`PollParams.readyOnly`): it returns exactly the full poll's rows, or
 * none when the outbox's tallies show something either guard of the full poll would act on (a
 * retry in the partition; under `group` ordering a retrying, or with `onDead: 'park'` a dead,
 * message with a group key anywhere in the outbox). Real files through better-sqlite3, with the
 * tallies' triggers as `migrate()` leaves them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, test } from 'vitest';
import type { Ordering } from 'outboxer';
import { sqliteDialect } from 'outboxer/better-sqlite3';
import { firstPoll } from '../support/poll-params.js';

const directory = mkdtempSync(join(tmpdir(), 'outboxer-ready-only-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));
const table = { schema: undefined, name: 'ready_only' };

let files = 0;
function database() {
  const db = new Database(join(directory, `${++files}.db`));
  for (const statement of sqliteDialect.schema(table)) db.exec(statement);
  // Ready rows of partition 0 in four groups, and one row without a group.
  const insert = db.prepare(
    `INSERT INTO ready_only (outbox, partition, group_key, payload) VALUES ('o', ?, ?, '1')`,
  );
  for (let i = 0; i < 8; i++) insert.run(0, `g${i % 4}`);
  insert.run(0, null);
  return db;
}

function poll(db: Database.Database, ordering: Ordering, readyOnly: boolean, parkDead = false) {
  const statement = sqliteDialect.poll(table, firstPoll({ ordering, parkDead, readyOnly }));
  const rows = db.prepare(statement.text).all(...statement.values) as Record<string, unknown>[];
  return statement.read(rows).messages.map((m) => [m.id, m.status, m.blocked]);
}

describe.each(['group', 'none'] as const)('%s ordering', (ordering) => {
  test('with nothing retrying or parked, the full poll’s rows', () => {
    const db = database();
    expect(poll(db, ordering, true)).toEqual(poll(db, ordering, false));
    expect(poll(db, ordering, true)).toHaveLength(9);
  });

  test('a retry in the partition, due or not: none', () => {
    const db = database();
    db.exec(`UPDATE ready_only SET status = 1, next_attempt_at = ${Date.now() + 60_000} WHERE id = 9`);
    expect(poll(db, ordering, true)).toEqual([]);
    expect(poll(db, ordering, false)).toHaveLength(8);
  });

  test('a retry with a group key in another partition: none under group ordering', () => {
    const db = database();
    db.exec(
      `INSERT INTO ready_only (outbox, partition, group_key, payload, status, next_attempt_at) VALUES ('o', 1, 'g0', '1', 1, ${Date.now() + 60_000})`,
    );
    if (ordering === 'group') {
      expect(poll(db, ordering, true)).toEqual([]);
      // The full poll skips g0's rows in partition 0.
      expect(poll(db, ordering, false).filter(([, , blocked]) => blocked)).toHaveLength(2);
    } else {
      expect(poll(db, ordering, true)).toEqual(poll(db, ordering, false));
    }
  });

  test('a dead message with a group key: none only when dead messages are parked', () => {
    const db = database();
    db.exec(
      `INSERT INTO ready_only (outbox, partition, group_key, payload, status) VALUES ('o', 1, 'g1', '1', 3)`,
    );
    expect(poll(db, ordering, true, false)).toEqual(poll(db, ordering, false, false));
    expect(poll(db, ordering, true, true)).toEqual(
      ordering === 'group' ? [] : poll(db, ordering, false, true),
    );
  });

  test('another outbox’s retries change nothing', () => {
    const db = database();
    db.exec(
      `INSERT INTO ready_only (outbox, partition, group_key, payload, status, next_attempt_at) VALUES ('other', 0, 'g0', '1', 1, 0)`,
    );
    expect(poll(db, ordering, true)).toEqual(poll(db, ordering, false));
  });
});
