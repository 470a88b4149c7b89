/**
 * Option objects tried at random (fast-check): any of them builds an instance or throws
 * INVALID_OPTIONS / INVALID_IDENTIFIER, never anything else.
 */
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { Outboxer, functionRelay } from 'outboxer';
import { sqliteFixture } from '../support/databases.js';
import { codeOf } from './support.js';
import { RUNS } from './bad-input.support.js';

describe('options, tried at random', () => {
  const { database } = sqliteFixture();
  const relay = functionRelay(async () => undefined);
  const value = fc.oneof(
    fc.anything({ maxDepth: 2 }),
    fc.integer({ min: -5, max: 100_000 }),
    fc.double(),
    fc.constantFrom(
      Infinity,
      -Infinity,
      NaN,
      0,
      1,
      1.5,
      2 ** 31,
      'group',
      'total',
      'none',
      'delete',
      'force',
      true,
    ),
    fc.record({ min: fc.anything(), max: fc.anything() }, { requiredKeys: [] }),
    fc.record({ keep: fc.anything() }, { requiredKeys: [] }),
  );
  const outboxKeys = [
    'ordering',
    'partitions',
    'batchSize',
    'pollInterval',
    'deliveryTimeout',
    'maxAttempts',
    'backoff',
    'retention',
    'pruneInterval',
    'table',
    'notify',
    'serializeWrites',
    'maxPayloadBytes',
    'reconfigure',
    'colour',
  ];
  const instanceKeys = [
    'relay',
    'testing',
    'name',
    'schema',
    'leaseTimeout',
    'shutdownTimeout',
    'maxErrorLength',
    'verbose',
  ];
  const pick = (keys: string[]) =>
    fc
      .dictionary(fc.constantFrom(...keys), value, { maxKeys: 4 })
      .map((o) => ({ ...o }) as Record<string, unknown>);

  test('every option object builds an instance or is refused with INVALID_OPTIONS or INVALID_IDENTIFIER', () => {
    fc.assert(
      fc.property(
        pick(instanceKeys),
        pick(outboxKeys),
        fc.oneof(fc.constant('orders'), fc.string()),
        (instance, outbox, name) => {
          try {
            new Outboxer({ database, ...instance, outboxes: { [name]: { relay, ...outbox } } } as never);
          } catch (error) {
            expect(['INVALID_OPTIONS', 'INVALID_IDENTIFIER']).toContain(codeOf(error));
          }
        },
      ),
      { numRuns: RUNS * 4 },
    );
  });
});
