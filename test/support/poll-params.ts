import type { Ordering } from 'outboxer';

/** The worker of partition 0 of outbox `o`, as the dialect tests poll for it. */
export const testLease = { outbox: 'o', partition: 0, owner: 'x', epoch: 1 };

/**
 * What a worker passes `dialect.poll` on its first poll of {@link testLease}'s partition: from the
 * beginning, a batch of 100, retries due now, `group` ordering unless told.
 */
export function firstPoll(options: { ordering?: Ordering; parkDead?: boolean; readyOnly?: boolean } = {}) {
  return {
    lease: testLease,
    ordering: options.ordering ?? 'group',
    limit: 100,
    afterId: 0,
    dueBefore: null,
    now: Date.now(),
    parkDead: options.parkDead ?? false,
    ...(options.readyOnly === undefined ? {} : { readyOnly: options.readyOnly }),
  };
}
