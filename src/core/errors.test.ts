import { expect, test } from 'vitest';
import {
  DeliveryError,
  OutboxerError,
  PermanentError,
  describeError,
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
