/**
 * The send lane of a producer: one send in flight per producer object, shared by every relay and
 * partition that uses it, and the sends waiting behind it combined into as few requests as the
 * client allows.
 */
import { DeliveryError } from '../../core/errors.js';
import type { KafkaClientAdapter, KafkaRecord } from './kafka-client.js';
import { describeKafkaError } from './kafka-errors.js';

/** Records a relay hands to the lane: one planned send of one batch. */
export interface Contribution {
  /** Only contributions of the same adapter share a request. */
  readonly adapter: KafkaClientAdapter;
  readonly records: readonly KafkaRecord[];
  /** `topic:partition` of each record. */
  readonly partitions: ReadonlySet<string>;
  /** Estimated bytes on the wire, batch framing included. */
  readonly bytes: number;
  /** The relay's `maxBytes`: no request that carries these records grows past it. */
  readonly maxBytes: number;
  /** False for a send that must go alone (a record the broker refused, sent on its own to find it). */
  readonly shareable: boolean;
  /** Asked when a request is formed: true leaves the records out, unsent. */
  withdrawn(): boolean;
  /** Set by the lane once the records are in a request. */
  started: boolean;
}

interface Waiting {
  readonly contribution: Contribution;
  readonly resolve: (started: boolean) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Runs the sends of one producer one at a time. Both JS clients had bugs with concurrent sends on an
 * idempotent producer, and one send at a time keeps the batches of a partition in order.
 *
 * While a send is in flight, others queue; the next request takes the first one waiting and every
 * later one it can carry: of the same adapter, within the client's partitions per send and the
 * smallest `maxBytes` among them, and sharing no topic-partition with one left behind (so records of
 * a topic-partition keep the order they were queued in). Relays queue the sends of a batch at once
 * only where no ordering key spans two of them, so a request's failure is exact for each (the
 * client reports it per topic-partition) and no group's records overtake each other. With kafkajs
 * (one topic-partition per send) a batch's records spread over the topic's partitions, and alone
 * each would go out in a call per partition: combined, the calls stay about as large as the
 * batches. With one send in flight the broker's round trip sets the pace, so across a network
 * that is about twice the messages a second with kafkajs (docs/benchmarks.md).
 */
export class SendLane {
  /** Set after a failed send on a client with {@link KafkaClientAdapter.resetIdempotence}. */
  needsReset = false;
  private readonly queue: Waiting[] = [];
  private running: Promise<void> | undefined;

  /**
   * Queues `contribution`; resolves `true` once its request succeeded, `false` when it was withdrawn
   * before one took it, and rejects with the request's error.
   */
  submit(contribution: Contribution): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      this.queue.push({ contribution, resolve, reject });
      this.running ??= this.drain();
    });
  }

  /** Resolves when the sends queued so far are done. */
  idle(): Promise<void> {
    return this.running ?? Promise.resolve();
  }

  private async drain(): Promise<void> {
    // One microtask: the sends a batch queues in one go reach the first request together.
    await Promise.resolve();
    try {
      for (let request = this.take(); request.length > 0; request = this.take()) {
        // After a failure the relays settle theirs before the next request is formed: a batch whose
        // send failed in transport withdraws its other sends still waiting.
        if (!(await this.send(request))) await new Promise((resolve) => setImmediate(resolve));
      }
    } finally {
      this.running = undefined;
    }
  }

  /** Takes the next request's contributions off the queue (none when the queue is empty). */
  private take(): Waiting[] {
    const chosen: Waiting[] = [];
    const kept: Waiting[] = [];
    const partitions = new Set<string>();
    const passed = new Set<string>();
    let bytes = 0;
    let maxBytes = Number.POSITIVE_INFINITY;
    for (const waiting of this.queue) {
      const c = waiting.contribution;
      if (c.withdrawn()) {
        waiting.resolve(false);
        continue;
      }
      const head = chosen[0]?.contribution;
      if (head === undefined || (head.shareable && this.fits(c, head, partitions, passed, bytes, maxBytes))) {
        chosen.push(waiting);
        for (const id of c.partitions) partitions.add(id);
        bytes += c.bytes;
        maxBytes = Math.min(maxBytes, c.maxBytes);
      } else {
        kept.push(waiting);
        for (const id of c.partitions) passed.add(id);
      }
    }
    this.queue.length = 0;
    this.queue.push(...kept);
    return chosen;
  }

  private fits(
    c: Contribution,
    head: Contribution,
    partitions: ReadonlySet<string>,
    passed: ReadonlySet<string>,
    bytes: number,
    maxBytes: number,
  ): boolean {
    if (!c.shareable || c.adapter !== head.adapter) return false;
    if (bytes + c.bytes > Math.min(maxBytes, c.maxBytes)) return false;
    let added = 0;
    for (const id of c.partitions) {
      if (passed.has(id)) return false;
      if (!partitions.has(id)) added += 1;
    }
    return partitions.size + added <= head.adapter.partitionsPerSend;
  }

  /** Sends one request; false when it failed. */
  private async send(request: readonly Waiting[]): Promise<boolean> {
    const { adapter } = request[0]!.contribution;
    for (const { contribution } of request) contribution.started = true;
    try {
      if (this.needsReset && adapter.resetIdempotence !== undefined) {
        await adapter.resetIdempotence().catch((error: unknown) => {
          throw new DeliveryError(
            `Could not start a new idempotent ${adapter.client} producer session after a failed send: ${describeKafkaError(error)}`,
            { cause: error },
          );
        });
        this.needsReset = false;
      }
      const records =
        request.length === 1
          ? request[0]!.contribution.records
          : request.flatMap((w) => w.contribution.records);
      try {
        await adapter.send(records);
      } catch (error) {
        // The client's sequence numbers may now disagree with the broker's: start over before the next send.
        if (adapter.resetIdempotence !== undefined) this.needsReset = true;
        throw error;
      }
    } catch (error) {
      for (const waiting of request) waiting.reject(error);
      return false;
    }
    for (const waiting of request) waiting.resolve(true);
    return true;
  }
}

const lanes = new WeakMap<object, SendLane>();

/** The lane of a producer object. */
export function laneOf(producer: object): SendLane {
  let lane = lanes.get(producer);
  if (lane === undefined) {
    lane = new SendLane();
    lanes.set(producer, lane);
  }
  return lane;
}
