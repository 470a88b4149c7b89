/**
 * The checker of the inbox's chaos proof (chaos/inbox-check.ts) on made-up runs: it must see each
 * way a consumer can get effectively-once wrong, and must not pass a run that proved nothing.
 */
import { describe, expect, test } from 'vitest';
import {
  compareEffects,
  inboxViolations,
  type Committed,
  type Effect,
  type InboxReport,
} from '../../chaos/inbox-check.js';

const committed = new Map<number, Committed>([
  [1, { group_key: 'g', seq: 1, hash: 'h1' }],
  [2, { group_key: 'h', seq: 1, hash: 'h2' }],
  [3, { group_key: 'g', seq: 2, hash: 'h3' }],
  [4, { group_key: null, seq: 0, hash: 'h4' }],
]);

const effect = (id: number, overrides: Partial<Effect> = {}): Effect => {
  const truth = committed.get(id);
  return {
    message_id: String(id),
    group_key: truth?.group_key ?? null,
    group_seq: truth?.seq ?? 0,
    hash: truth?.hash ?? 'x',
    consumer: 'c1.0',
    out_of_order: false,
    ...overrides,
  };
};

/** A report of a run whose counts agree, with the comparison of `effects`. */
function report(effects: Effect[], rolledBack: number[] = [], extra: Partial<InboxReport> = {}): InboxReport {
  return {
    broker: 'test',
    outbox: 'inbox_test',
    committed: committed.size,
    effects: effects.length,
    doubled: 0,
    inboxRecords: effects.length,
    carried: null,
    carriedDuplicates: null,
    duplicatesAbsorbed: 0,
    consumerExits: 0,
    ...compareEffects(committed, effects, new Set(rolledBack)),
    ...extra,
  };
}

describe('the inbox proof checker', () => {
  test('passes every committed message with one effect, in group order', () => {
    expect(inboxViolations(report([effect(1), effect(2), effect(3), effect(4)]))).toEqual([]);
  });

  test('sees a committed message without an effect, and the count that differs', () => {
    const found = inboxViolations(report([effect(1), effect(2), effect(3)]));
    expect(found).toContain('inbox_test: 1 committed messages without an effect');
    expect(found).toContain('inbox_test: 3 effects for 4 committed messages');
  });

  test('sees a second effect of a message', () => {
    const all = [effect(1), effect(2), effect(3), effect(4)];
    expect(inboxViolations(report(all, [], { doubled: 1 }))).toEqual([
      'inbox_test: 1 second effects of a message',
    ]);
  });

  test('sees an effect of a rolled-back message and of one never committed', () => {
    const all = [effect(1), effect(2), effect(3), effect(4)];
    const found = inboxViolations(report([...all, effect(7), effect(9)], [7]));
    expect(found).toContain('inbox_test: 2 effects of messages never committed');
    expect(found).toContain('inbox_test: 1 effects from rolled-back transactions');
  });

  test("sees a group's effects out of the producer's order, and a late report", () => {
    const found = inboxViolations(
      report([effect(3), effect(2), effect(1, { out_of_order: true }), effect(4)]),
    );
    expect(found).toContain('inbox_test: 1 effects out of their group order');
    expect(found).toContain('inbox_test: 1 messages the inbox reported late');
  });

  test('sees altered content and inbox records that do not match the effects', () => {
    const all = [effect(1), effect(2, { hash: 'other' }), effect(3), effect(4)];
    const found = inboxViolations(report(all, [], { inboxRecords: 5 }));
    expect(found).toContain('inbox_test: 1 effects of corrupted messages');
    expect(found).toContain('inbox_test: 5 inbox records for 4 effects');
  });

  test('does not pass a run that committed nothing', () => {
    const empty = { ...report([]), committed: 0, missing: 0 };
    expect(inboxViolations(empty)).toEqual(['inbox_test: nothing committed, nothing proved']);
  });
});
