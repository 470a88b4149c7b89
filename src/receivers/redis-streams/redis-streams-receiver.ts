/**
 * The Redis Streams receiver: an entry read with XREADGROUP becomes one inbox call in the
 * consumer's transaction, and it is acknowledged (XACK) only after that transaction committed. An
 * entry that fails stays pending in the group: the consumer reads it again from its pending list
 * (XREADGROUP with id 0), or another consumer claims it (XAUTOCLAIM). Structural: nothing of
 * ioredis is imported.
 */
import { OutboxerError } from '../../core/errors.js';
import {
  InboxReceiver,
  type ReceivedMessage,
  type ReceiveOutcome,
  type ReceiverOptions,
} from '../../core/inbox/receiver.js';
import { invalidOption } from '../../core/options.js';
import { OUTBOXER_HEADERS } from '../../relays/shared/headers.js';
import type { RedisClientLike } from '../../relays/redis-streams/redis-streams-client.js';
import { OrderedLanes } from '../shared/lanes.js';
import { settleInOrder } from '../shared/settle.js';

/** An entry as XREADGROUP (and XAUTOCLAIM) return it in ioredis: its id and its flat field list. */
export type RedisStreamEntry = readonly [id: string, fields: readonly string[]];

/**
 * Options of {@link redisStreamsReceiver}: those of every receiver, the client, the stream and
 * its consumer group.
 *
 * @example
 * redisStreamsReceiver({ outboxer, inbox: 'shipping', redis, stream: 'orders', group: 'shipping', transaction, handler });
 */
export type RedisStreamsReceiverOptions<
  OutboxerTx,
  Sync extends boolean,
  Tx extends OutboxerTx = OutboxerTx,
> = ReceiverOptions<ReceivedMessage<RedisStreamEntry>, OutboxerTx, Sync, Tx, RedisStreamEntry> &
  RedisStreamsReceiverOwnOptions;

/** What {@link redisStreamsReceiver} takes besides the options of every receiver. */
export interface RedisStreamsReceiverOwnOptions {
  /** Your ioredis client: the XACKs go through it. */
  redis: RedisClientLike;
  /** The stream key the entries were read from. */
  stream: string;
  /** The consumer group they were read with. */
  group: string;
}

const WHAT = 'redisStreamsReceiver';

/**
 * A receiver for entries read with `XREADGROUP GROUP <group> <consumer> … STREAMS <stream> …`:
 * `await receive(entry)` handles the entry once in your transaction, then XACKs it; an entry that
 * fails stays pending and is logged through the instance's logger. The entries of one group key
 * are handled one after another in outbox id order, also when called without awaiting, and those
 * waiting behind a failure stay pending with it. Resolves to a settled result, never rejects.
 *
 * @example
 * const [[, entries] = [null, []]] = (await redis.xreadgroup('GROUP', 'shipping', 'worker-1',
 *   'COUNT', 100, 'BLOCK', 5000, 'STREAMS', 'orders', pendingFirst ? '0' : '>')) ?? [];
 * for (const entry of entries) await receive(entry);
 */
export function redisStreamsReceiver<OutboxerTx, Sync extends boolean, Tx extends OutboxerTx = OutboxerTx>(
  options: RedisStreamsReceiverOptions<OutboxerTx, Sync, Tx>,
): (entry: RedisStreamEntry) => Promise<PromiseSettledResult<ReceiveOutcome>> {
  const receiver = new InboxReceiver<ReceivedMessage<RedisStreamEntry>, Sync, RedisStreamEntry>(
    WHAT,
    options,
    ['redis', 'stream', 'group'],
  );
  const { redis } = options;
  if (typeof redis?.pipeline !== 'function') throw invalidOption(`${WHAT}.redis`, 'an ioredis client', redis);
  const stream = nonEmpty('stream', options.stream);
  const group = nonEmpty('group', options.group);
  const lanes = new OrderedLanes();

  async function acknowledge(id: string): Promise<void> {
    const replies = await redis.pipeline([['xack', stream, group, id]]).exec();
    const error = replies?.[0]?.[0];
    if (error)
      throw new OutboxerError('DELIVERY_FAILED', `XACK of entry ${id} failed: ${error.message}`, {
        cause: error,
      });
  }

  return (entry) => {
    if (!Array.isArray(entry) || typeof entry[0] !== 'string' || !Array.isArray(entry[1]))
      throw invalidOption(`${WHAT}(entry)`, 'an entry [id, fields] as XREADGROUP returns it', entry);
    const [id, list] = entry;
    const fields: Record<string, string> = {};
    for (let i = 0; i + 1 < list.length; i += 2) fields[list[i]!] = list[i + 1]!;
    const headers = headersOf(fields);
    return settleInOrder(
      receiver,
      lanes,
      entry,
      { headers, body: fields.payload, destination: stream },
      // Nothing to give back: the entry stays pending until it is read again or claimed.
      { acknowledge: () => acknowledge(id), giveBack: () => undefined },
    );
  };
}

function nonEmpty(option: string, value: unknown): string {
  if (typeof value !== 'string' || value === '')
    throw invalidOption(`${WHAT}.${option}`, 'a non-empty string', value);
  return value;
}

/**
 * The entry's headers: the relay's `headers` field (JSON, outboxer's included), with its `id`,
 * `outbox`, `type` and `groupKey` fields as outboxer's headers when the JSON is missing.
 */
function headersOf(fields: Readonly<Record<string, string>>): Record<string, string> {
  const headers: Record<string, string> = {};
  const named: Array<[string, string | undefined]> = [
    [OUTBOXER_HEADERS.id, fields.id],
    [OUTBOXER_HEADERS.outbox, fields.outbox],
    [OUTBOXER_HEADERS.type, fields.type],
    [OUTBOXER_HEADERS.groupKey, fields.groupKey],
  ];
  for (const [name, value] of named) if (value !== undefined) headers[name] = value;
  if (fields.headers === undefined) return headers;
  try {
    const parsed = JSON.parse(fields.headers) as unknown;
    if (typeof parsed === 'object' && parsed !== null)
      for (const [name, value] of Object.entries(parsed))
        if (typeof value === 'string') headers[name] = value;
  } catch {
    // not the relay's: the named fields stand
  }
  return headers;
}
