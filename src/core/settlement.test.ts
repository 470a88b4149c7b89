import { describe, expect, test } from 'vitest';
import type { PolledEnvelope } from './database.js';
import { PermanentError, DeliveryError } from './errors.js';
import { resolveOutbox } from './options.js';
import { functionRelay } from './relay.js';
import { isAcknowledgeOnly, normalizeOutcomes, planSettlement } from './settlement.js';

const relay = functionRelay(async () => undefined);
const outbox = (options: Record<string, unknown> = {}) =>
  resolveOutbox(
    'orders',
    { relay, backoff: { min: 100, max: 1000 }, ...options },
    { relaying: true, schema: undefined },
  );

let nextId = 1;
function message(groupKey: string | null, extra: Partial<PolledEnvelope> = {}): PolledEnvelope {
  return {
    id: nextId++,
    outbox: 'orders',
    type: null,
    groupKey,
    partition: 0,
    payload: {},
    headers: {},
    attempts: 0,
    lastError: null,
    nextAttemptAt: null,
    failingSince: null,
    insertedAt: new Date(),
    status: 0,
    blocked: false,
    ...extra,
  };
}
const ok = { ok: true } as const;
const fail = (error: unknown = new Error('no')) => ({ ok: false, error }) as const;

describe('planSettlement', () => {
  test('after a failure in a group, later messages of that group are skipped even if reported delivered', () => {
    const batch = [message('a'), message('a'), message('b'), message(null), message('a')];
    const plan = planSettlement(batch, [fail(), ok, ok, fail(), ok], outbox(), 1000, () => 0.5);
    expect(plan.delivered.map((m) => m.id)).toEqual([batch[2]!.id]);
    expect(plan.failed.map((f) => f.id)).toEqual([batch[0]!.id, batch[3]!.id]);
    expect(plan.skipped.map((m) => m.id)).toEqual([batch[1]!.id, batch[4]!.id]);
  });

  test("'total' ordering: one failure skips everything after it", () => {
    const batch = [message('a'), message('b'), message(null)];
    const plan = planSettlement(batch, [fail(), ok, ok], outbox({ ordering: 'total' }), 1000);
    expect(plan.delivered).toEqual([]);
    expect(plan.skipped).toHaveLength(2);
  });

  test("'none' ordering: failures are independent", () => {
    const batch = [message('a'), message('a')];
    const plan = planSettlement(batch, [fail(), ok], outbox({ ordering: 'none' }), 1000);
    expect(plan.delivered).toHaveLength(1);
  });

  test('maxAttempts makes a message dead and unblocks its group when it was a retrying head', () => {
    const head = message('a', { attempts: 2, status: 1 });
    const plan = planSettlement([head], [fail()], outbox({ maxAttempts: 3 }), 1000);
    expect(plan.failed[0]).toMatchObject({ dead: true });
    expect(plan.unblockedGroups).toEqual(['a']);
  });

  test('a delivered retrying head unblocks its group; a first-attempt success does not need to', () => {
    const plan = planSettlement(
      [message('a', { status: 1, attempts: 1 }), message('b')],
      [ok, ok],
      outbox(),
      1000,
    );
    expect(plan.unblockedGroups).toEqual(['a']);
  });

  test('a permanent error is dead at once with finite maxAttempts, retried at max backoff in strict mode', () => {
    const permanent = new PermanentError('rejected');
    expect(
      planSettlement([message('a')], [fail(permanent)], outbox({ maxAttempts: 10 }), 1000).failed[0],
    ).toMatchObject({ dead: true });
    expect(planSettlement([message('a')], [fail(permanent)], outbox(), 1000).failed[0]).toMatchObject({
      dead: false,
      delay: 1000,
    });
  });

  test('retryAfter from the destination overrides backoff', () => {
    const plan = planSettlement(
      [message('a')],
      [fail(new DeliveryError('slow down', { retryAfter: 7000 }))],
      outbox(),
      1000,
    );
    expect(plan.failed[0]!.delay).toBe(7000);
  });

  test('errors are recorded as short text', () => {
    const plan = planSettlement([message('a')], [fail(new Error('x'.repeat(10_000)))], outbox(), 300);
    expect(plan.failed[0]!.error.length).toBeLessThanOrEqual(300);
  });
});

describe('normalizeOutcomes', () => {
  const batch = [message('a'), message('b')];
  test('undefined means all delivered; a throw means none', () => {
    expect(normalizeOutcomes(batch, { returned: undefined })).toEqual([ok, ok]);
    const error = new Error('down');
    expect(normalizeOutcomes(batch, { thrown: error })).toEqual([fail(error), fail(error)]);
  });
  test('a wrong number of outcomes counts as a failure of the whole batch', () => {
    const outcomes = normalizeOutcomes(batch, { returned: [ok] });
    expect(outcomes.every((o) => !o.ok)).toBe(true);
  });
});

test('retryAfter is kept between a floor and a day', () => {
  const zero = planSettlement(
    [message('a')],
    [fail(new DeliveryError('now', { retryAfter: 0 }))],
    outbox(),
    1000,
  );
  expect(zero.failed[0]!.delay).toBe(100);
  const huge = planSettlement(
    [message('a')],
    [fail(new DeliveryError('later', { retryAfter: 1e12 }))],
    outbox(),
    1000,
  );
  expect(huge.failed[0]!.delay).toBe(86_400_000);
});

describe('isAcknowledgeOnly', () => {
  test('everything delivered, nothing failed, no group unblocked; a settlement or its parameters alike', () => {
    expect(isAcknowledgeOnly({ delivered: [1], failed: [], unblockedGroups: [] })).toBe(true);
    expect(isAcknowledgeOnly({ delivered: [], failed: [], unblockedGroups: [] })).toBe(false);
    expect(isAcknowledgeOnly({ delivered: [1], failed: [{ id: 2 }], unblockedGroups: [] })).toBe(false);
    expect(isAcknowledgeOnly({ delivered: [1], failed: [], unblockedGroups: ['a'] })).toBe(false);
    const plan = planSettlement([message('a'), message('b')], [ok, ok], outbox(), 1000);
    expect(isAcknowledgeOnly(plan)).toBe(true);
  });
});
