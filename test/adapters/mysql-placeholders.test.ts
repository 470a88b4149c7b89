/**
 * The escaping of question marks that are not placeholders in MySQL statements, for MikroORM,
 * which reads `?` anywhere in the text as a placeholder and `\?` as a question mark.
 */
import { describe, expect, test } from 'vitest';
import { mysqlDialect } from 'outboxer/mysql2';
import { escapeMysqlQuestionMarks } from '../../src/adapters/shared/mysql-placeholders.js';
import { dialectQueries } from './dialect-queries.js';

describe('escapeMysqlQuestionMarks', () => {
  test.each([
    ['a placeholder stays', 'SELECT ?', 'SELECT ?'],
    ['in a string', "SELECT 'why?', ?", "SELECT 'why\\?', ?"],
    ['in a double-quoted string', 'SELECT "why?", ?', 'SELECT "why\\?", ?'],
    ['after a doubled quote', "SELECT 'it''s?', ?", "SELECT 'it''s\\?', ?"],
    ['after a backslash-escaped quote', "SELECT 'it\\'s?', ?", "SELECT 'it\\'s\\?', ?"],
    ['after an escaped backslash, the string ends', "SELECT 'a\\\\', ?", "SELECT 'a\\\\', ?"],
    ['in a quoted identifier, with a doubled backtick', 'SELECT 1 AS `a``?`, ?', 'SELECT 1 AS `a``\\?`, ?'],
    ['a backslash in an identifier escapes nothing', 'SELECT 1 AS `a\\`, ?', 'SELECT 1 AS `a\\`, ?'],
    ['in a -- comment, to the end of the line', 'SELECT ? -- why?\n, ?', 'SELECT ? -- why\\?\n, ?'],
    ['`--` before no space is arithmetic', 'SELECT 1--1, ?', 'SELECT 1--1, ?'],
    ['in a # comment', 'SELECT ? # why?\n, ?', 'SELECT ? # why\\?\n, ?'],
    ['in a block comment', 'SELECT /* why? */ ?', 'SELECT /* why\\? */ ?'],
    ['a division is no comment', 'SELECT 4/2, ?', 'SELECT 4/2, ?'],
    ['an unterminated string runs to the end', "SELECT ?, 'why?", "SELECT ?, 'why\\?"],
  ])('%s', (_what, text, escaped) => {
    expect(escapeMysqlQuestionMarks(text)).toBe(escaped);
  });

  test('the MySQL dialect writes no question mark that is not a placeholder, one per value', () => {
    for (const { name, query } of dialectQueries(mysqlDialect)) {
      expect(escapeMysqlQuestionMarks(query.text), name).toBe(query.text);
      expect(query.text.split('?').length - 1, name).toBe(query.values.length);
    }
  });
});
