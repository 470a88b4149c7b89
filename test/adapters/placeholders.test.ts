/**
 * The one placeholder rewrite ($n → ?) that the Knex and MikroORM adapters share, and the Postgres
 * array literals that every non-pg Postgres adapter sends.
 */
import pg from 'pg';
import { afterAll, describe, expect, test } from 'vitest';
import { isOutboxerError } from 'outboxer';
import { postgresDialect } from 'outboxer/pg';
import { sqliteDialect } from 'outboxer/better-sqlite3';
import { toQuestionMarks } from '../../src/adapters/shared/placeholders.js';
import { postgresArrayLiteral, withArrayLiterals } from '../../src/adapters/shared/postgres-values.js';
import { DATABASE_URL } from '../support/databases.js';
import { coveredMethods, dialectQueries } from './dialect-queries.js';

const knexStyle = { escapeLiterals: true };
const plain = { escapeLiterals: false };

describe('toQuestionMarks', () => {
  test('rewrites $n in the order of the text, repeating and reordering values', () => {
    expect(toQuestionMarks({ text: 'SELECT $2, $1, $2', values: ['a', 'b'] }, plain)).toEqual({
      text: 'SELECT ?, ?, ?',
      values: ['b', 'a', 'b'],
    });
  });

  test('$10 is the tenth value, not $1 followed by 0', () => {
    const values = Array.from({ length: 11 }, (_, i) => `v${i + 1}`);
    expect(toQuestionMarks({ text: 'SELECT $10, $1, $11', values }, plain)).toEqual({
      text: 'SELECT ?, ?, ?',
      values: ['v10', 'v1', 'v11'],
    });
  });

  test('keeps casts: $1::bigint[] becomes ?::bigint[]', () => {
    expect(
      toQuestionMarks({ text: 'WHERE id = ANY($1::bigint[]) AND x = $2::json', values: [[1], '{}'] }, plain),
    ).toEqual({
      text: 'WHERE id = ANY(?::bigint[]) AND x = ?::json',
      values: [[1], '{}'],
    });
  });

  test.each([
    ['a string literal', `SELECT '$1', $1`, `SELECT '$1', ?`],
    ['a literal with a doubled quote', `SELECT 'it''s $1', $1`, `SELECT 'it''s $1', ?`],
    ["an escape string with \\'", `SELECT E'a\\' $1', $1`, `SELECT E'a\\' $1', ?`],
    ['a quoted identifier', `SELECT "col$1", "a""$1", $1`, `SELECT "col$1", "a""$1", ?`],
    ['an identifier containing $', `SELECT foo$1, $1`, `SELECT foo$1, ?`],
    ['a dollar-quoted string', `SELECT $$ $1 $$, $1`, `SELECT $$ $1 $$, ?`],
    ['a tagged dollar-quoted string', `SELECT $fn$ '$1' $fn$, $1`, `SELECT $fn$ '$1' $fn$, ?`],
    ['a line comment', `SELECT 1 -- $1\n, $1`, `SELECT 1 -- $1\n, ?`],
    ['a nested block comment', `SELECT /* $1 /* $1 */ $1 */ $1`, `SELECT /* $1 /* $1 */ $1 */ ?`],
  ])('leaves $n inside %s alone', (_, text, expected) => {
    expect(toQuestionMarks({ text, values: ['x'] }, plain)).toEqual({ text: expected, values: ['x'] });
  });

  test("keeps outboxer's literals: '-infinity', 'outboxer:migrate', interval '1 millisecond'", () => {
    const text = `SELECT '-infinity', hashtextextended('outboxer:migrate', 0), now() + $1 * interval '1 millisecond'`;
    expect(toQuestionMarks({ text, values: [5] }, knexStyle)).toEqual({
      text: `SELECT '-infinity', hashtextextended('outboxer:migrate', 0), now() + ? * interval '1 millisecond'`,
      values: [5],
    });
  });

  test('escapes every other question mark as \\? for Knex and MikroORM, inside literals too', () => {
    const text = `SELECT '?', data ? 'key', "q?", $1 -- why?`;
    expect(toQuestionMarks({ text, values: [1] }, knexStyle).text).toBe(
      `SELECT '\\?', data \\? 'key', "q\\?", ? -- why\\?`,
    );
    expect(toQuestionMarks({ text, values: [1] }, plain).text).toBe(
      `SELECT '?', data ? 'key', "q?", ? -- why?`,
    );
  });

  test('refuses a backslash before a question mark, which Knex would eat', () => {
    expect(() => toQuestionMarks({ text: `SELECT E'\\?'`, values: [] }, knexStyle)).toThrow(/backslash/);
  });

  test('a placeholder without a value is a bug, reported as such', () => {
    let error: unknown;
    try {
      toQuestionMarks({ text: 'SELECT $1, $3', values: ['a', 'b'] }, plain);
    } catch (caught) {
      error = caught;
    }
    expect(isOutboxerError(error)).toBe(true);
    expect((error as Error).message).toMatch(/\$3 has no value/);
  });
});

/** Writes the values into the text, so two renderings of one query compare as strings. */
function inline(text: string, pattern: RegExp, value: (match: string) => unknown): string {
  return text.replace(pattern, (match) => `<${JSON.stringify(value(match))}>`);
}

describe('every Postgres dialect query through toQuestionMarks', () => {
  test('the list covers every method of the dialect', () => {
    expect(
      Object.keys(postgresDialect)
        .filter((k) => typeof (postgresDialect as never)[k] === 'function')
        .sort(),
    ).toEqual([...coveredMethods].sort());
    // The statements of the tallies' upkeep are covered too.
    expect(dialectQueries(postgresDialect).map((q) => q.name)).toEqual(
      expect.arrayContaining(['tallies.compact', 'tallies.recount']),
    );
  });

  test('outboxer never puts $ or ? inside a literal or quoted identifier', () => {
    for (const { name, query } of dialectQueries(postgresDialect)) {
      for (const quoted of query.text.match(/'[^']*'|"[^"]*"/g) ?? []) {
        expect(quoted, name).not.toMatch(/[$?]/);
      }
    }
  });

  test.each(dialectQueries(postgresDialect))(
    '$name: same statement, same values, with ? placeholders',
    ({ query }) => {
      const rewritten = toQuestionMarks(query, knexStyle);
      // Independent of the scanner: outboxer's SQL has no $ in literals (checked above), so a regex will do.
      const expected = inline(query.text, /\$(\d+)/g, (m) => query.values[Number(m.slice(1)) - 1]);
      let i = 0;
      const actual = inline(rewritten.text, /(?<!\\)\?/g, () => rewritten.values[i++]).replaceAll('\\?', '?');
      expect(actual).toBe(expected);
      expect(i).toBe(rewritten.values.length);
      expect(rewritten.text).not.toMatch(/\$\d/);
    },
  );

  test('SQLite queries already use ? and no $n: Kysely and Drizzle on SQLite pass them as they are', () => {
    for (const { name, query } of dialectQueries(sqliteDialect)) {
      expect(query.text, name).not.toMatch(/\$\d/);
      expect(query.text.split('?').length - 1, name).toBe(query.values.length);
    }
  });
});

describe('Postgres array literals', () => {
  test.each([
    [[], '{}'],
    [['a', null, 'x,"y'], '{"a",NULL,"x,\\"y"}'],
    [['NULL', '', '{}', 'back\\slash'], '{"NULL","","{}","back\\\\slash"}'],
    [[1, 2.5, -3], '{"1","2.5","-3"}'],
    [[true, false, null], '{"t","f",NULL}'],
  ])('%j → %s', (values, literal) => {
    expect(postgresArrayLiteral(values)).toBe(literal);
  });

  test('withArrayLiterals replaces arrays only', () => {
    const date = new Date(0);
    expect(withArrayLiterals(['a', 1, null, date, [1, 2]])).toEqual(['a', 1, null, date, '{"1","2"}']);
  });

  describe('round trip through Postgres', () => {
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
    afterAll(() => pool.end());

    test.each([
      ['text[]', ['a', null, 'x,"y', 'NULL', '', '{}', 'back\\slash', "it's", 'ü €', '?', '$1']],
      ['bigint[]', ['1', '9007199254740993', null]],
      ['int[]', [0, -1, 2147483647]],
      ['boolean[]', [true, false, null]],
      ['float8[]', [1.5, 0, -2.25, 1e-7]],
    ])('%s', async (type, values) => {
      const { rows } = await pool.query(`SELECT $1::${type} AS v`, [postgresArrayLiteral(values)]);
      expect(rows[0].v).toEqual(values);
    });

    test('json[] keeps each JSON text as it is', async () => {
      const texts = ['{"a":"?"}', '"$1"', 'null', '[1,2]', null, '{"q":"\\"x\\""}'];
      const { rows } = await pool.query(`SELECT array_agg(j::text) AS v FROM unnest($1::json[]) AS j`, [
        postgresArrayLiteral(texts),
      ]);
      expect(rows[0].v).toEqual(texts);
    });
  });
});
