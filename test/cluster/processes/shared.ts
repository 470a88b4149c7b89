import type { OutboxOptions } from 'outboxer';

/** What every node of the multi-process test agrees on. */
export const clusterOutboxOptions: OutboxOptions = {
  table: 'events',
  partitions: 6,
  batchSize: 20,
  pollInterval: 50,
  notify: true,
  // Three concurrent writers share groups: without it a later id can commit first (docs/ordering.md).
  serializeWrites: true,
  backoff: { min: 20, max: 200 },
};
