/**
 * A received message's identity as the inbox keeps it: the id, the source and the group key,
 * checked before any SQL runs, so that bad input writes nothing and every database refuses the
 * same input with the same typed error.
 */
import { MAX_GROUP_KEY_BYTES } from '../encoding.js';
import { OutboxerError } from '../errors.js';

/**
 * The longest message id and source kept, in characters: they are keys, not payloads, and the
 * limits are the narrowest database's (MySQL keeps a primary key within 3072 bytes, 4 a character),
 * so every database refuses the same input with the same typed error.
 */
export const MAX_INBOX_ID_LENGTH = 400;
export const MAX_INBOX_SOURCE_LENGTH = 255;

export function invalid(inbox: string, detail: string): OutboxerError {
  return new OutboxerError('INVALID_MESSAGE', `Inbox "${inbox}": ${detail}`);
}

export function idText(inbox: string, id: unknown): string {
  if (typeof id === 'number' && Number.isSafeInteger(id)) return String(id);
  if (typeof id !== 'string' || id.length === 0) {
    throw invalid(
      inbox,
      `id must be a non-empty string or a safe integer; got ${id === undefined ? 'undefined' : typeof id}.`,
    );
  }
  checkKeyText(inbox, 'id', id);
  return id;
}

export function sourceText(inbox: string, source: unknown): string {
  if (source === undefined) return '';
  if (typeof source !== 'string') throw invalid(inbox, `source must be a string; got ${typeof source}.`);
  checkKeyText(inbox, 'source', source);
  return source;
}

export function groupKeyText(inbox: string, key: unknown): string | null {
  if (key === undefined || key === null) return null;
  if (typeof key !== 'string' || key.length === 0)
    throw invalid(inbox, 'groupKey must be a non-empty string, null or undefined.');
  if (key.includes('\0'))
    throw invalid(inbox, 'groupKey contains a NUL character (U+0000), which Postgres cannot store.');
  if (Buffer.byteLength(key, 'utf8') > MAX_GROUP_KEY_BYTES)
    throw invalid(inbox, `groupKey is longer than ${MAX_GROUP_KEY_BYTES} bytes.`);
  return key;
}

function checkKeyText(inbox: string, what: 'id' | 'source', value: string): void {
  const longest = what === 'id' ? MAX_INBOX_ID_LENGTH : MAX_INBOX_SOURCE_LENGTH;
  if (value.length > longest)
    throw invalid(
      inbox,
      `${what} is longer than ${longest} characters; use a shorter ${what} or a hash of it.`,
    );
  if (value.includes('\0'))
    throw invalid(inbox, `${what} contains a NUL character (U+0000), which Postgres cannot store.`);
  if (/[\uD800-\uDFFF]/.test(value.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g, ''))) {
    throw invalid(inbox, `${what} contains a lone surrogate, which is not valid Unicode text.`);
  }
}
