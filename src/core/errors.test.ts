import { expect, test } from 'vitest';
import {
  DeliveryError,
  OutboxerError,
  PermanentError,
  describeError,
  explainMissingSchema,
  isOutboxerError,
  redactCredentials,
} from './errors.js';

test('errors carry a stable code, a cause and a retryable flag, and are recognised across copies', () => {
  const cause = new Error('low level');
  const error = new OutboxerError('UNKNOWN_OUTBOX', 'nope', { cause });
  expect(error.code).toBe('UNKNOWN_OUTBOX');
  expect(error.cause).toBe(cause);
  expect(error.retryable).toBe(false);
  expect(isOutboxerError(error)).toBe(true);
  // Another copy of the package: same brand, different class.
  const foreign = Object.assign(new Error('x'), { [Symbol.for('outboxer.error')]: true });
  expect(isOutboxerError(foreign)).toBe(true);
  expect(isOutboxerError(new Error('x'))).toBe(false);
  expect(new PermanentError('bad body')).toMatchObject({
    permanent: true,
    retryable: false,
    code: 'DELIVERY_FAILED',
  });
  expect(new DeliveryError('busy', { retryAfter: 5000 })).toMatchObject({
    permanent: false,
    retryable: true,
    retryAfter: 5000,
  });
});

test('describeError truncates, redacts credentials and removes NUL characters', () => {
  expect(describeError(new Error('x'.repeat(5000)), 200).length).toBeLessThanOrEqual(200);
  expect(describeError(new Error('connect postgres://app:s3cret@db:5432/x failed'), 500)).toBe(
    'Error: connect postgres://app:***@db:5432/x failed',
  );
  expect(describeError('a\u0000b', 100)).toBe('a\uFFFDb');
  expect(describeError({ status: 500 }, 100)).toBe('{"status":500}');
  // Never splits a surrogate pair.
  const text = describeError('🎉'.repeat(300), 101);
  expect(text.isWellFormed()).toBe(true);
  expect(redactCredentials('amqp://guest:guest@localhost')).toBe('amqp://guest:***@localhost');
});

test("a missing table is explained as SCHEMA_MISSING only when it is the outbox's own, or a companion of it", () => {
  const dialect = {
    missingSchemaObject: (message: string) => /relation ("[^"]+") does not exist/.exec(message)?.[1],
  } as never;
  const table = { schema: undefined, name: 'orders' };
  const ours = new Error('relation "orders_tallies" does not exist');
  const explained = explainMissingSchema(dialect, table, new Error('wrapped', { cause: ours }));
  expect(explained).toMatchObject({ code: 'SCHEMA_MISSING', cause: { cause: ours } });
  expect(
    explainMissingSchema(
      dialect,
      { schema: 'app', name: 'orders' },
      new Error('relation "app.orders" does not exist'),
    ),
  ).toMatchObject({ code: 'SCHEMA_MISSING' });
  // A relay's own table, or a table whose name merely starts like ours, is someone else's.
  for (const message of [
    'relation "pgboss.job" does not exist',
    'relation "ordersx" does not exist',
    'relation "orders_archive" does not exist',
  ]) {
    const theirs = new Error(message);
    expect(explainMissingSchema(dialect, table, theirs)).toBe(theirs);
  }
});
