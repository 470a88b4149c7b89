const encoder = new TextEncoder();

/**
 * 32-bit FNV-1a of the key's UTF-8 bytes. Stable across processes, platforms and versions: the
 * partition stored on a row must be the one every node computes for the same key.
 */
export function hashGroupKey(key: string): number {
  let hash = 0x811c9dc5;
  for (const byte of encoder.encode(key)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/**
 * The partition of a message. Ordered messages go to the partition of their group key; unordered
 * ones (no key, or `ordering: 'none'`) are spread at random, since nothing ties them together.
 */
export function choosePartition(
  orderingKey: string | null,
  partitions: number,
  random: () => number = Math.random,
): number {
  if (partitions === 1) return 0;
  if (orderingKey === null) return Math.floor(random() * partitions);
  return hashGroupKey(orderingKey) % partitions;
}
