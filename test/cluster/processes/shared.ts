import type { OutboxOptions } from 'outboxer';

/** What every node of the multi-process test agrees on. */
export const clusterOutboxOptions: OutboxOptions = {
  table: 'events',
  partitions: 6,
  batchSize: 20,
  pollInterval: 50,
  notify: true,
  backoff: { min: 20, max: 200 },
};
