import type { SqlQuery } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';

/** How {@link toQuestionMarks} writes a query for a library that binds `?` positionally. */
export interface QuestionMarkOptions {
  /**
   * Write every `?` that is not a placeholder as `\?`. Knex and MikroORM read `?` (and `??`)
   * anywhere in the text, string literals included, and `\?` as a literal question mark.
   */
  readonly escapeLiterals: boolean;
}

const IDENTIFIER_CHAR = /[A-Za-z0-9_$\u0080-\uffff]/;
const DOLLAR_TAG = /^\$(?:[A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/;

/**
 * Rewrites a Postgres query's `$n` placeholders as positional `?` for Knex and MikroORM. `$n` may
 * appear several times and in any order (`$1` twice, `$10` before `$2`): the values are repeated
 * and reordered to follow the text. What is not SQL code is copied untouched: string literals
 * (`'…'` with `''`, `E'…'` with backslash escapes), quoted identifiers (`"…"`), dollar-quoted
 * strings (`$tag$…$tag$`), `--` and nested `/* … *\/` comments, and identifiers that contain `$`.
 *
 * @example
 * toQuestionMarks({ text: 'SELECT $2, $1, $2', values: ['a', 'b'] }, { escapeLiterals: true });
 * // { text: 'SELECT ?, ?, ?', values: ['b', 'a', 'b'] }
 */
export function toQuestionMarks(query: SqlQuery, options: QuestionMarkOptions): SqlQuery {
  const { text } = query;
  const values: unknown[] = [];
  let out = '';
  let i = 0;
  /** Copies text[i, end) as it is, escaping question marks when asked to. */
  const copy = (end: number): void => {
    const chunk = text.slice(i, end);
    out += options.escapeLiterals ? escapeQuestionMarks(chunk) : chunk;
    i = end;
  };
  while (i < text.length) {
    const char = text[i]!;
    const next = text[i + 1];
    if (char === "'") {
      const escaped = i > 0 && /[Ee]/.test(text[i - 1]!) && !(i > 1 && IDENTIFIER_CHAR.test(text[i - 2]!));
      copy(endOfQuoted(text, i, "'", escaped));
    } else if (char === '"') {
      copy(endOfQuoted(text, i, '"', false));
    } else if (char === '-' && next === '-') {
      const end = text.indexOf('\n', i);
      copy(end === -1 ? text.length : end);
    } else if (char === '/' && next === '*') {
      copy(endOfBlockComment(text, i));
    } else if (char === '$' && !(i > 0 && IDENTIFIER_CHAR.test(text[i - 1]!))) {
      const number = /^\$(\d+)/.exec(text.slice(i));
      if (number !== null) {
        const index = Number(number[1]);
        if (index < 1 || index > query.values.length) {
          throw new OutboxerError(
            'INVALID_STATE',
            `Placeholder $${number[1]} has no value (the query has ${query.values.length}). This is a bug in outboxer: please report it.`,
          );
        }
        if (options.escapeLiterals && out.endsWith('\\')) throw backslashBeforeQuestionMark();
        values.push(query.values[index - 1]);
        out += '?';
        i += number[0].length;
        continue;
      }
      const tag = DOLLAR_TAG.exec(text.slice(i));
      if (tag !== null) {
        const close = text.indexOf(tag[0], i + tag[0].length);
        copy(close === -1 ? text.length : close + tag[0].length);
      } else {
        copy(i + 1);
      }
    } else if (char === '?' && options.escapeLiterals) {
      copy(i + 1);
    } else {
      // Plain code up to the next character that can start something special.
      let end = i + 1;
      while (end < text.length && !`'"-/$?`.includes(text[end]!)) end += 1;
      out += text.slice(i, end);
      i = end;
    }
  }
  return { text: out, values };
}

function escapeQuestionMarks(chunk: string): string {
  if (/\\\?/.test(chunk)) throw backslashBeforeQuestionMark();
  return chunk.replaceAll('?', '\\?');
}

/** Knex and MikroORM read `\?` as an escaped question mark and drop the backslash. */
function backslashBeforeQuestionMark(): OutboxerError {
  return new OutboxerError(
    'INVALID_STATE',
    'A query has a backslash before a question mark, which Knex and MikroORM cannot pass through. This is a bug in outboxer: please report it.',
  );
}

/**
 * The index just past the closing quote of a literal or quoted identifier opened at `start`: the
 * quote doubled stays inside, and with `backslashEscapes` so does any character after a backslash.
 */
export function endOfQuoted(text: string, start: number, quote: string, backslashEscapes: boolean): number {
  let i = start + 1;
  while (i < text.length) {
    const char = text[i]!;
    if (backslashEscapes && char === '\\') {
      i += 2;
    } else if (char === quote) {
      if (text[i + 1] === quote) i += 2;
      else return i + 1;
    } else {
      i += 1;
    }
  }
  return text.length;
}

/** Postgres block comments nest. */
function endOfBlockComment(text: string, start: number): number {
  let depth = 0;
  let i = start;
  while (i < text.length) {
    if (text[i] === '/' && text[i + 1] === '*') {
      depth += 1;
      i += 2;
    } else if (text[i] === '*' && text[i + 1] === '/') {
      depth -= 1;
      i += 2;
      if (depth === 0) return i;
    } else {
      i += 1;
    }
  }
  return text.length;
}
