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
