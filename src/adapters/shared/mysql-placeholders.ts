import { endOfQuoted } from './placeholders.js';

/**
 * Writes every `?` of a MySQL statement that is not a placeholder as `\?`: those in string
 * literals (`'…'` and `"…"`, with backslash escapes and doubled quotes), quoted identifiers
 * (`` `…` ``) and comments (`-- `, `#`, `/* … *\/`). MikroORM reads `?` anywhere in the text as a
 * placeholder (`??` as an identifier) and `\?` as a question mark, dropping just that backslash, so
 * the text the server receives is the statement as written. The placeholders stay as they are.
 *
 * @example
 * escapeMysqlQuestionMarks("SELECT 'why?' AS q, ? AS v"); // "SELECT 'why\\?' AS q, ? AS v"
 */
export function escapeMysqlQuestionMarks(text: string): string {
  let out = '';
  let i = 0;
  /** Copies text[i, end), each question mark escaped. */
  const copy = (end: number): void => {
    out += text.slice(i, end).replaceAll('?', '\\?');
    i = end;
  };
  while (i < text.length) {
    const char = text[i]!;
    const next = text[i + 1];
    if (char === "'" || char === '"' || char === '`') {
      // Strings take backslash escapes (unless the server runs with NO_BACKSLASH_ESCAPES, where
      // outboxer's statements have none), identifiers do not; both double their quote.
      copy(endOfQuoted(text, i, char, char !== '`'));
    } else if (char === '#' || (char === '-' && next === '-' && /^\s?$/.test(text[i + 2] ?? ''))) {
      // `--` starts a comment only before whitespace (or at the end): `1--1` is arithmetic.
      const end = text.indexOf('\n', i);
      copy(end === -1 ? text.length : end);
    } else if (char === '/' && next === '*') {
      const end = text.indexOf('*/', i + 2);
      copy(end === -1 ? text.length : end + 2);
    } else {
      // Code up to the next character that can start a literal or a comment; its `?` are placeholders.
      let end = i + 1;
      while (end < text.length && !`'"\`#-/`.includes(text[end]!)) end += 1;
      out += text.slice(i, end);
      i = end;
    }
  }
  return out;
}
