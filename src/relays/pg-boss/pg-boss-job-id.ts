/**
 * Job ids that are both deterministic (a redelivery hits the same primary key, and pg-boss's
 * `ON CONFLICT DO NOTHING` ignores it) and ordered by outbox id (pg-boss fetches by
 * `priority desc, created_on, id`, and jobs inserted together share `created_on`).
 *
 * Layout, an RFC 9562 version 8 ("custom") UUID; Postgres compares uuids byte by byte:
 *
 * | bits   | content                                        |
 * | ------ | ---------------------------------------------- |
 * | 0–47   | outbox id ÷ 4096 (high 48 of 60 bits)           |
 * | 48–51  | version 8                                       |
 * | 52–63  | outbox id mod 4096 (low 12 bits)                |
 * | 64–65  | variant `10`                                    |
 * | 66–127 | SHA-256 of namespace and outbox name (62 bits)  |
 *
 * The version nibble is the same in every id, so byte order is outbox id order.
 */
import { createHash } from 'node:crypto';

const MAX_ID = 2 ** 53 - 1;
const suffixes = new Map<string, Buffer>();

function suffixOf(namespace: string, outbox: string): Buffer {
  const cacheKey = `${namespace}\u0000${outbox}`;
  let suffix = suffixes.get(cacheKey);
  if (suffix === undefined) {
    suffix = createHash('sha256').update(cacheKey).digest().subarray(0, 8);
    suffix[0] = 0x80 | (suffix[0]! & 0x3f); // variant 10
    if (suffixes.size < 10_000) suffixes.set(cacheKey, suffix);
  }
  return suffix;
}

/**
 * The pg-boss job id of an outbox message: a version 8 UUID whose first 60 bits are the outbox id
 * and whose last 62 bits hash `namespace` and the outbox name. Ids of one outbox sort like
 * their outbox ids.
 *
 * @example
 * pgBossJobId({ outbox: 'orders', id: 42 }) // '00000000-0000-802a-....-............'
 * pgBossJobId({ outbox: 'orders', id: 42 }, 'billing') // same prefix, another suffix
 */
export function pgBossJobId(
  envelope: { readonly outbox: string; readonly id: number },
  namespace = '',
): string {
  const { id } = envelope;
  if (!Number.isSafeInteger(id) || id < 0 || id > MAX_ID)
    throw new RangeError(`pgBossJobId: ${id} is not an outbox id`);
  const bytes = Buffer.alloc(16);
  bytes.writeUIntBE(Math.floor(id / 4096), 0, 6);
  const low = id % 4096;
  bytes[6] = 0x80 | (low >> 8); // version 8
  bytes[7] = low & 0xff;
  suffixOf(namespace, envelope.outbox).copy(bytes, 8);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * The outbox id inside a job id made by {@link pgBossJobId}, or `undefined` for another uuid.
 * (The `outboxer-id` header in the job's data says the same.)
 *
 * @example
 * outboxIdOfJobId(job.id) // 42
 */
export function outboxIdOfJobId(jobId: string): number | undefined {
  const hex = jobId.replace(/-/g, '');
  if (!/^[0-9a-f]{32}$/i.test(hex) || hex[12] !== '8' || !/^[89ab]$/i.test(hex[16]!)) return undefined;
  const bytes = Buffer.from(hex, 'hex');
  const id = bytes.readUIntBE(0, 6) * 4096 + (((bytes[6]! & 0x0f) << 8) | bytes[7]!);
  return Number.isSafeInteger(id) ? id : undefined;
}
