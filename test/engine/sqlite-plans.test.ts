/**
 * The plans SQLite picks for the statements that look up a group's blocking message: by group key
 * in the `_blocking` index, never by walking every retrying message of the outbox.
 */
import Database from 'better-sqlite3';
import { describe, expect, test } from 'vitest';
import type { SqlQuery } from 'outboxer';
import { sqliteDialect } from 'outboxer/better-sqlite3';
import { firstPoll, testLease } from '../support/poll-params.js';

const table = { schema: undefined, name: 'm' };
const lease = testLease;

function planOf(db: Database.Database, query: SqlQuery): string[] {
  const rows = db.prepare(`EXPLAIN QUERY PLAN ${query.text}`).all(...(query.values as unknown[]));
  return (rows as Array<{ detail: string }>).map((row) => row.detail);
}

describe.each([false, true])('parkDead %s', (parkDead) => {
  const db = new Database(':memory:');
  for (const statement of sqliteDialect.schema(table)) db.exec(statement);

  test.each([
    ['the poll', sqliteDialect.poll(table, firstPoll({ parkDead }))],
    ['hold', sqliteDialect.hold(table, lease, [1, 2], ['g'], parkDead)],
    ['releaseOrphanedHolds', sqliteDialect.releaseOrphanedHolds(table, 'o', parkDead)],
  ])("%s finds a group's blocking message by its key", (_, query) => {
    const probes = planOf(db, query).filter((detail) => / h /.test(detail));
    expect(probes).toEqual(['SEARCH h USING INDEX m_blocking (outbox=? AND group_key=?)']);
  });
});
