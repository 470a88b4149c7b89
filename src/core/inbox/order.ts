/**
 * Order at the consumer: the inbox delivers a late message and reports it, it does not hold it.
 * An outboxer id grows per outbox but not contiguously per group (other groups take the ids in
 * between), so the inbox cannot know a message is missing until that message arrives; holding
 * the later one would need the producer to send the previous id of each group.
 */

/**
 * Where a handled message stands in its group's order, given to the handler and returned by
 * `handle`: `outOfOrder: true` when a message of the same group with a higher `sequence` was
 * handled before it, `after` being the highest sequence handled so far (decimal text).
 */
export type InboxOrder =
  { readonly outOfOrder: false } | { readonly outOfOrder: true; readonly after: string };

export const IN_ORDER: InboxOrder = Object.freeze({ outOfOrder: false });

/** The largest sequence kept: a signed 64-bit integer, as every database's BIGINT / INTEGER. */
export const MAX_INBOX_SEQUENCE = 9_223_372_036_854_775_807n;

/**
 * The sequence as canonical decimal text, or undefined when there is none; a message of its own
 * when it is not a non-negative integer within a signed 64-bit range.
 */
export function sequenceText(sequence: unknown): string | { problem: string } | undefined {
  if (sequence === undefined || sequence === null) return undefined;
  const problem = {
    problem: `sequence must be a non-negative integer (a safe integer, a bigint or a decimal string up to ${MAX_INBOX_SEQUENCE}); got ${describe(sequence)}.`,
  };
  let value: bigint;
  if (typeof sequence === 'number') {
    if (!Number.isSafeInteger(sequence)) return problem;
    value = BigInt(sequence);
  } else if (typeof sequence === 'bigint') value = sequence;
  else if (typeof sequence === 'string' && /^[0-9]{1,19}$/.test(sequence)) value = BigInt(sequence);
  else return problem;
  return value < 0n || value > MAX_INBOX_SEQUENCE ? problem : value.toString();
}

/** The order of a message of sequence `sequence` whose group's highest is now `highest`. */
export function orderOf(sequence: string, highest: string): InboxOrder {
  return BigInt(highest) > BigInt(sequence) ? { outOfOrder: true, after: highest } : IN_ORDER;
}

function describe(value: unknown): string {
  if (typeof value === 'string')
    return value.length > 40 ? `a string of ${value.length} characters` : JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  return typeof value;
}
