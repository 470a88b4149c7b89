/** The Postgres channel every outboxer instance LISTENs on (`notify: true`). */
export const NOTIFY_CHANNEL = 'outboxer';

/**
 * What a publish sends on {@link NOTIFY_CHANNEL} for one partition, and what the partition's worker
 * checks for publishers in flight: `<instance name>:<outbox>:<partition>`. The listener reads the
 * outbox and partition back from the right.
 */
export function notifyPayload(instance: string, outbox: string, partition: number): string {
  return `${instance}:${outbox}:${partition}`;
}

/**
 * What a node sends on {@link NOTIFY_CHANNEL} when it hands partitions of an outbox back or joins
 * (`notify`): `<instance name>:<outbox>:rebalance`. Every node's coordinator of that outbox runs a
 * coordination step at once instead of at its next tick, so a partition released by `stop()` is
 * taken within milliseconds. (A node of an earlier version reads no partition number and ignores it.)
 */
export function rebalancePayload(instance: string, outbox: string): string {
  return `${instance}:${outbox}:${REBALANCE}`;
}

/** The last field of {@link rebalancePayload}. */
export const REBALANCE = 'rebalance';
