/**
 * What the job queue receivers (BullMQ, pg-boss) share: the identity of a job the relays added,
 * read from its data (`{ payload, headers }`, the relays' default) or, for a job whose data is the
 * bare payload, from its id (each relay's default job id carries the outbox id). The queue acks
 * the job when the worker's function returns, and retries it when it throws: the receiver's
 * function resolves after the commit and throws when anything failed.
 */
import type { ReceivedIdentity } from '../../core/inbox/receiver.js';
import { OUTBOXER_HEADERS } from '../../relays/shared/headers.js';
import { identityOf, headersOf } from './received.js';

/** A job's data, its id and its queue, as any job queue gives them. */
export interface JobParts {
  readonly id: string | undefined;
  readonly queue: string;
  readonly data: unknown;
}

/** What a relay's default job id says: the outbox id, and the outbox when it is in there. */
export type JobIdReader = (jobId: string) => { readonly id: string; readonly outbox?: string } | undefined;

/** The identity, the headers and the body of a job. */
export function jobIdentity(
  job: JobParts,
  source: string | undefined,
  readJobId: JobIdReader,
): { identity: ReceivedIdentity; headers: Record<string, string>; body: unknown } {
  const data = job.data as { payload?: unknown; headers?: unknown } | null | undefined;
  const wrapped =
    typeof data === 'object' && data !== null && 'headers' in data && typeof data.headers === 'object';
  const headers = wrapped ? headersOf(data.headers) : {};
  const fromId =
    headers[OUTBOXER_HEADERS.id] !== undefined || job.id === undefined ? undefined : readJobId(job.id);
  if (fromId !== undefined) {
    if (fromId.outbox !== undefined) headers[OUTBOXER_HEADERS.outbox] ??= fromId.outbox;
    headers[OUTBOXER_HEADERS.id] = fromId.id;
  }
  return { identity: identityOf(headers, job.queue, source), headers, body: wrapped ? data.payload : data };
}
