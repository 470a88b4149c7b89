/**
 * The relay contract suite: every relay runs it against its real server. It publishes through a
 * real outbox (a SQLite file), lets the relay deliver, consumes what arrived at the destination and
 * checks it. A relay's test file calls {@link relayContract} with a harness for its destination.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { isOutboxerError, Outboxer, SKIPPED, type Headers, type OutboxOptions, type Relay } from 'outboxer';
import { sqliteFixture } from '../support/databases.js';
import { waitUntil } from '../support/random.js';

/** A message as the consumer saw it at the destination. */
export interface Received {
  /** The outbox id, read back from what the relay sent (header, message id, body…). */
  readonly id: number;
  readonly groupKey: string | null;
  readonly payload: unknown;
  /** The destination's deduplication id, where it has one (Nats-Msg-Id, MessageDeduplicationId, jobId…). */
  readonly dedupeId?: string;
}

/** One fresh destination (a new topic, queue, stream…) and the means to read it back. */
export interface Destination {
  readonly relay: Relay;
  /** Everything received so far, in the order the destination hands it out per group. */
  received(): Promise<Received[]>;
  /** Takes the destination down and brings it back (a stopped server, a paused queue…), where possible. */
  readonly outage?: {
    begin(): Promise<void>;
    end(): Promise<void>;
    /**
     * True when the client holds a send through the outage instead of failing it (it retries until
     * the destination is back), so that no failure need be recorded meanwhile. Default false: the
     * relay must report a (retryable) failure while the destination is down.
     */
    readonly holdsSends?: boolean;
  };
  teardown(): Promise<void>;
}

/** A relay that cannot work as configured, and the error it must report. */
export interface Misconfiguration {
  readonly relay: Relay;
  /**
   * What `start()` throws or the first delivery records, matched against `CODE: message` (`CODE`
   * is the OutboxerError code, e.g. `RELAY_MISCONFIGURED`, or the error's name for another error).
   */
  readonly error: RegExp;
  teardown?(): Promise<void>;
}

/** A message the destination refuses for good, and the relay that sends it there. */
export interface Refusal {
  readonly relay: Relay;
  readonly message: {
    readonly payload: unknown;
    readonly groupKey?: string;
    readonly type?: string;
    readonly headers?: Headers;
  };
  /** What the permanent error's message must say. */
  readonly error?: RegExp;
  teardown?(): Promise<void>;
}

export interface RelayHarness {
  readonly name: string;
  /** True when the destination keeps per-group order; false (SQS standard) skips the order checks. */
  readonly keepsOrder: boolean;
  /** True when `dedupeId` must equal the outbox id. */
  readonly dedupesById: boolean;
  /** Messages for the order test. Default 2000 over 40 groups. */
  readonly messages?: number;
  readonly groups?: number;
  /** Outbox options for the relay under test (batchSize, partitions…). */
  readonly outboxOptions?: Partial<OutboxOptions>;
  destination(): Promise<Destination>;
  /** A relay pointed at something that does not exist or with bad credentials, and the error it must report. */
  misconfigured(): Promise<Misconfiguration>;
  /**
   * A message the destination refuses for good (an HTTP 4xx, a message over the size limit…), where
   * the destination has such a refusal; without it the permanent-error test is skipped.
   */
  refusal?(): Promise<Refusal>;
  /** How long to wait for deliveries. Default 60 s. */
  readonly timeout?: number;
}

/** Polls `check` until it holds; throws naming `what` after `timeout` ms. */
export const waitFor = waitUntil;

/**
 * The message of the INVALID_OPTIONS error that `create` throws, as every relay factory does for
 * options it cannot take; fails the test when `create` throws anything else, or nothing.
 *
 * @example
 * expect(invalidOptions(() => natsRelay({} as never))).toMatch(/natsRelay\.jetstream/);
 */
export function invalidOptions(create: () => unknown): string {
  try {
    create();
  } catch (error) {
    expect(isOutboxerError(error) && error.code).toBe('INVALID_OPTIONS');
    return (error as Error).message;
  }
  throw new Error('the options were accepted');
}

/** First deliveries per group must be in id order; returns the violations. */
export function orderViolations(received: readonly Received[]): string[] {
  const seen = new Set<number>();
  const lastByGroup = new Map<string, number>();
  const violations: string[] = [];
  for (const message of received) {
    if (seen.has(message.id)) continue; // a duplicate: only first deliveries count
    seen.add(message.id);
    if (message.groupKey === null) continue;
    const last = lastByGroup.get(message.groupKey) ?? 0;
    if (message.id < last) violations.push(`group ${message.groupKey}: ${message.id} arrived after ${last}`);
    lastByGroup.set(message.groupKey, Math.max(last, message.id));
  }
  return violations;
}

/** Whether the engine treats an error as permanent (what settlement checks). */
export function isPermanent(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { permanent?: unknown }).permanent === true;
}

/** `CODE: message` of an OutboxerError, `Name: message` of another error: what harnesses' `error` matches. */
export function describeFailure(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const label = isOutboxerError(error) ? error.code : error instanceof Error ? error.name : typeof error;
  return `${label}: ${message}`;
}

/**
 * Wraps a relay and keeps every error it reported: thrown by `start()` or `deliver()`, or returned
 * as an outcome (skips aside). The engine only stores their text; the contract checks the objects.
 */
export function recordingRelay(relay: Relay): { relay: Relay; errors: unknown[] } {
  const errors: unknown[] = [];
  const wrapped: Relay = {
    name: relay.name,
    async deliver(batch, context) {
      try {
        const outcomes = await relay.deliver(batch, context);
        for (const outcome of outcomes ?? [])
          if (!outcome.ok && outcome.error !== SKIPPED) errors.push(outcome.error);
        return outcomes;
      } catch (error) {
        errors.push(error);
        throw error;
      }
    },
  };
  if (relay.start !== undefined) {
    wrapped.start = async () => {
      try {
        await relay.start!();
      } catch (error) {
        errors.push(error);
        throw error;
      }
    };
  }
  if (relay.stop !== undefined) wrapped.stop = () => relay.stop!();
  return { relay: wrapped, errors };
}

export function relayContract(harness: RelayHarness): void {
  const timeout = harness.timeout ?? 60_000;
  describe(`${harness.name} relay contract`, () => {
    const fixture = sqliteFixture();
    afterAll(() => fixture.close());

    async function withOutboxer<T>(
      relay: Relay,
      table: string,
      fn: (outboxer: Outboxer<unknown, boolean>) => Promise<T>,
      options: Partial<OutboxOptions> = {},
    ): Promise<T> {
      const outboxer = new Outboxer({
        database: fixture.database,
        outboxes: {
          events: {
            relay,
            pollInterval: 50,
            backoff: { min: 50, max: 500 },
            table,
            ...options,
            ...harness.outboxOptions,
          },
        },
        leaseTimeout: 5000,
      });
      await outboxer.migrate();
      try {
        return await fn(outboxer);
      } finally {
        await outboxer.stop();
      }
    }

    /**
     * Waits until the destination holds every one of `ids`, then checks that it holds nothing else
     * and, where it keeps order, that first deliveries came in order per group.
     */
    async function expectArrived(destination: Destination, ids: number[], what: string): Promise<Received[]> {
      let received: Received[] = [];
      await waitFor(
        async () => {
          received = await destination.received();
          return new Set(received.map((m) => m.id)).size >= ids.length;
        },
        timeout,
        what,
      );
      expect(new Set(received.map((m) => m.id))).toEqual(new Set(ids));
      if (harness.keepsOrder) expect(orderViolations(received)).toEqual([]);
      return received;
    }

    function publish(
      outboxer: Outboxer<unknown, boolean>,
      count: number,
      groups: number,
      offset = 0,
    ): number[] {
      let ids: number[] = [];
      fixture.db.transaction(() => {
        ids = outboxer.publishMany(
          fixture.db,
          Array.from({ length: count }, (_, i) => ({
            outbox: 'events',
            payload: { n: offset + i, text: 'x'.repeat(50) },
            groupKey: `g${(offset + i) % groups}`,
          })),
        ) as number[];
      })();
      return ids;
    }

    test(
      'delivers every message, in order per group, with the dedupe id',
      async () => {
        const destination = await harness.destination();
        try {
          const count = harness.messages ?? 2000;
          const ids = await withOutboxer(destination.relay, 'order_test', async (outboxer) => {
            await outboxer.start();
            const published: number[] = [];
            for (let chunk = 0; chunk < 4; chunk += 1)
              published.push(...publish(outboxer, count / 4, harness.groups ?? 40, (chunk * count) / 4));
            await waitFor(
              async () => (await outboxer.counts('events')).pending === 0,
              timeout,
              'the outbox to drain',
            );
            return published;
          });
          const received = await expectArrived(destination, ids, 'every message at the destination');
          if (harness.dedupesById) {
            for (const message of received) expect(message.dedupeId).toBe(String(message.id));
          }
        } finally {
          await destination.teardown();
        }
      },
      timeout * 3,
    );

    test(
      'messages wait while the destination is down, failing with retryable errors, and arrive in order after it is back',
      async (context) => {
        const destination = await harness.destination();
        if (destination.outage === undefined) {
          await destination.teardown();
          context.skip();
          return;
        }
        const recorder = recordingRelay(destination.relay);
        try {
          const ids = await withOutboxer(
            recorder.relay,
            'outage_test',
            async (outboxer) => {
              await outboxer.start();
              await destination.outage!.begin();
              const published = publish(outboxer, 100, 5);
              // Publishing is unaffected while the destination is down.
              published.push(...publish(outboxer, 100, 5, 100));
              await new Promise((resolve) => setTimeout(resolve, 1500));
              expect((await outboxer.counts('events')).pending).toBeGreaterThan(0);
              // The failures are recorded as retryable: nothing went dead, the groups wait for a retry.
              if (destination.outage!.holdsSends !== true) {
                await waitFor(
                  async () => (await outboxer.blockedGroups('events')).length > 0,
                  timeout,
                  'a failed delivery recorded during the outage',
                );
              }
              for (const group of await outboxer.blockedGroups('events')) {
                expect(group.parked).toBe(false);
                expect(String(group.lastError)).not.toMatch(/^PermanentError/);
              }
              await destination.outage!.end();
              await waitFor(
                async () => (await outboxer.counts('events')).pending === 0,
                timeout,
                'the outbox to drain after the outage',
              );
              expect((await outboxer.counts('events')).dead).toBe(0);
              return published;
            },
            // Finite, so that an error taken for permanent would make its message dead at once.
            { maxAttempts: 1000 },
          );
          if (destination.outage.holdsSends !== true) expect(recorder.errors.length).toBeGreaterThan(0);
          expect(recorder.errors.filter(isPermanent).map(describeFailure)).toEqual([]);
          await expectArrived(destination, ids, 'every message after the outage');
        } finally {
          await destination.teardown();
        }
      },
      timeout * 3,
    );

    test('a message the destination refuses for good goes dead at once with a permanent error', async (context) => {
      if (harness.refusal === undefined) {
        context.skip();
        return;
      }
      const refusal = await harness.refusal();
      const recorder = recordingRelay(refusal.relay);
      const outboxer = new Outboxer({
        database: fixture.database,
        outboxes: {
          events: { relay: recorder.relay, table: 'refusal_test', maxAttempts: 10, ...harness.outboxOptions },
        },
        testing: 'manual',
      });
      try {
        await outboxer.migrate();
        const { payload, groupKey = 'g', type, headers } = refusal.message;
        let id = 0;
        fixture.db.transaction(() => {
          id = outboxer.publish(fixture.db, 'events', payload, { groupKey, type, headers }) as number;
        })();
        const result = await outboxer.drain('events', { maxRounds: 1 });
        expect(result.retried.map((r) => r.error)).toEqual([]);
        expect(result.dead.map((d) => d.envelope.id)).toEqual([id]);
        expect(recorder.errors).toHaveLength(1);
        const error = recorder.errors[0];
        expect(isPermanent(error), describeFailure(error)).toBe(true);
        if (refusal.error !== undefined) expect(describeFailure(error)).toMatch(refusal.error);
        expect(await outboxer.counts('events')).toMatchObject({ pending: 0, dead: 1 });
      } finally {
        await outboxer.close().catch(() => undefined);
        await refusal.teardown?.();
      }
    });

    describe('misconfiguration', () => {
      let misconfiguration: Misconfiguration;
      beforeAll(async () => {
        misconfiguration = await harness.misconfigured();
      });
      afterAll(async () => {
        await misconfiguration?.teardown?.();
      });

      test('is reported as a clear error, and the message stays pending', async () => {
        const recorder = recordingRelay(misconfiguration.relay);
        const outboxer = new Outboxer({
          database: fixture.database,
          outboxes: { events: { relay: recorder.relay, table: 'misconfigured_test', maxAttempts: Infinity } },
          testing: 'manual',
        });
        await outboxer.migrate();
        try {
          fixture.db.transaction(() => outboxer.publish(fixture.db, 'events', { n: 1 }, { groupKey: 'g' }))();
          // start() throws, or the first delivery fails and is recorded.
          await outboxer.drain('events', { maxRounds: 1 }).catch(() => undefined);
        } finally {
          await outboxer.close().catch(() => undefined);
        }
        expect(recorder.errors.length, 'a start() error or a recorded delivery error').toBeGreaterThan(0);
        expect(describeFailure(recorder.errors[0])).toMatch(misconfiguration.error);
        expect(isPermanent(recorder.errors[0])).toBe(false);
        expect((await outboxer.counts('events')).pending).toBe(1);
      });
    });
  });
}
