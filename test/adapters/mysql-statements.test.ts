/**
 * Every MySQL statement, unexecuted: one value per `?` (mysql2 binds them in order, and a count
 * that drifted would shift every value after it), identifiers in backticks (double quotes are
 * strings in MySQL's default mode), and no value in the text.
 */
import { describe, expect, test } from 'vitest';
import { mysqlDialect } from 'outboxer/mysql2';
import { queriesOf } from '../../src/core/sql.js';
import { versionNumber } from '../../src/dialects/mysql/admin.js';
import { dialectQueries } from './dialect-queries.js';

describe('the MySQL dialect', () => {
  test.each(dialectQueries(mysqlDialect).map(({ name, query }) => [name, query] as const))(
    '%s: one value per placeholder, backticked names',
    (_, query) => {
      expect((query.text.match(/\?/g) ?? []).length).toBe(query.values.length);
      expect(query.text).not.toMatch(/"/);
      expect(query.text).not.toMatch(/node-1|order:1|it's down/);
    },
  );

  const inbox = mysqlDialect.inbox;
  const table = { schema: 'app', name: 'consumer_inbox' };
  const record = { inbox: 'payments', source: "it's down", messageId: 'order:1', groupKey: 'node-1' };
  test.each([
    ['inboxSchema', inbox.inboxSchema(table).map((text) => ({ text, values: [] }))],
    ['recordHandled', queriesOf(inbox.recordHandled(table, record, 1))],
    ['handledAt', [inbox.handledAt(table, record)]],
    ['pruneHandled', queriesOf(inbox.pruneHandled(table, 'payments', 1, 100))],
    [
      'advanceGroup',
      queriesOf(inbox.advanceGroup(table, { ...record, groupKey: 'node-1', sequence: '7' }, 1)),
    ],
    ['pruneGroups', queriesOf(inbox.pruneGroups(table, 'payments', 1, 100))],
    ['savepoints', [inbox.savepoint('s1'), inbox.releaseSavepoint('s1'), inbox.rollbackToSavepoint('s1')]],
  ] as const)('inbox %s: one value per placeholder, backticked names', (_, queries) => {
    for (const query of queries) {
      expect((query.text.match(/\?/g) ?? []).length).toBe(query.values.length);
      expect(query.text).not.toMatch(/"/);
      expect(query.text).not.toMatch(/node-1|order:1|it's down/);
    }
  });

  test('the inbox key fits InnoDB: 100 + 255 + 400 utf8mb4 characters, within 3072 bytes', () => {
    const ddl = inbox.inboxSchema(table).join('\n');
    expect(ddl).toMatch(/inbox VARCHAR\(100\)[^]*source VARCHAR\(255\)[^]*message_id VARCHAR\(400\)/);
    expect((100 + 255 + 400) * 4).toBeLessThanOrEqual(3072);
  });

  test("the groups' key fits InnoDB: the group key as its 512 bytes, not 512 utf8mb4 characters", () => {
    const ddl = inbox.inboxSchema(table).join('\n');
    expect(ddl).toMatch(/consumer_inbox_groups[^]*source VARCHAR\(255\)[^]*group_key VARBINARY\(512\)/);
    expect((100 + 255) * 4 + 512).toBeLessThanOrEqual(3072);
  });

  test.each([
    ['10.11.19-MariaDB-0+deb12u1', 101_119],
    ['10.5.27-MariaDB', 100_527],
    ['8.0.4', 100_600],
    ['8.4.3', 100_600 + 399],
    ['8.0.3-rc', 80_003],
    ['5.7.44-log', 50_744],
  ])('server version %s reads as %d', (version, number) => {
    expect(versionNumber(version)).toBe(number);
  });
});
