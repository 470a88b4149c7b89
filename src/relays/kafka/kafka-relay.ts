/**
 * The Kafka relay: each claimed batch goes out in idempotent sends (acks: -1), keyed by group key,
 * one send in flight per producer (the batches waiting behind it share the next, see kafka-lane.ts),
 * and a failure reported per message without breaking the order of a group.
 */
import { DeliveryError, OutboxerError, PermanentError } from '../../core/errors.js';
import {
  SKIPPED,
  type DeliveryContext,
  type DeliveryOutcome,
  type Envelope,
  type Relay,
} from '../../core/relay.js';
import { withDeadline } from '../shared/deadline.js';
import { KafkaSendError, partitionId } from './kafka-client.js';
import { laneOf } from './kafka-lane.js';
import {
  authenticationFailure,
  classifySendFailure,
  describeKafkaError,
  kafkaErrorNames,
} from './kafka-errors.js';
import {
  assignPartitions,
  draftRecords,
  BATCH_OVERHEAD,
  planSends,
  readyToSend,
  toRecord,
  type Draft,
} from './kafka-records.js';
import { abandoned, Abandoned, TopicPartitions } from './kafka-topics.js';
import { resolveOptions, type KafkaRelayOptions, type ResolvedOptions } from './kafka-options.js';

export type { KafkaRelayOptions } from './kafka-options.js';

/** How long `stop()` waits for a send still in flight, so the caller can close the producer after it. */
const STOP_GRACE = 5_000;
/** Errors after which the cached partition count of a topic may be wrong. */
const STALE_METADATA = [
  'UNKNOWN_TOPIC_OR_PARTITION',
  'NOT_LEADER_OR_FOLLOWER',
  'LEADER_NOT_AVAILABLE',
  'FENCED_LEADER_EPOCH',
];

/**
 * A relay to Kafka. The group key becomes the record key (no key when it is `null`), so a group stays
 * in one partition, in order; the value is the JSON payload; the headers are the message's own plus
 * `outboxer-id` (deduplicate on it), `outboxer-outbox`, `outboxer-type` and `outboxer-group-key`.
 *
 * @example
 * import { Producer } from '@platformatic/kafka';
 * import { kafkaRelay, platformaticProducer } from 'outboxer/kafka';
 * const producer = new Producer({ clientId: 'outboxer', bootstrapBrokers: ['127.0.0.1:9092'], idempotent: true });
 * const outboxer = new Outboxer({ database, outboxes: { orders: { relay: kafkaRelay({ producer: platformaticProducer(producer), topic: 'orders' }) } } });
 */
export function kafkaRelay(options: KafkaRelayOptions): Relay {
  return new KafkaRelay(resolveOptions(options));
}

class KafkaRelay implements Relay {
  readonly name: string;
  private readonly partitions: TopicPartitions;
  /** Ids of messages whose partition batch the broker refused as a whole: send them alone next time. */
  private readonly suspects = new Set<number>();
  private readonly stickyCounters = new Map<string, number>();

  constructor(private readonly options: ResolvedOptions) {
    this.name = options.name;
    this.partitions = new TopicPartitions(options.adapter, options.metadataTimeout);
  }

  async start(): Promise<void> {
    const { adapter, topic, metadataTimeout, startupCheck } = this.options;
    if (!startupCheck) return;
    try {
      await withDeadline(
        adapter.connect(),
        metadataTimeout,
        undefined,
        () => new Error(`no answer within ${metadataTimeout} ms`),
      );
    } catch (error) {
      const refused = authenticationFailure(error);
      throw new OutboxerError(
        'RELAY_MISCONFIGURED',
        refused !== undefined
          ? `Kafka relay "${this.name}": Kafka refused the SASL authentication of its ${adapter.client} producer (${refused}). The client said: ${describeKafkaError(error)}`
          : `Kafka relay "${this.name}" could not reach Kafka through its ${adapter.client} producer: ${describeKafkaError(error)}. Check the producer's bootstrap brokers, credentials and that Kafka is running, or pass startupCheck: false to start without Kafka.`,
        { cause: error },
      );
    }
    if (typeof topic !== 'string') return;
    const count = await this.partitions.lookup(topic).catch((error: unknown) => {
      throw new OutboxerError(
        'RELAY_MISCONFIGURED',
        `Kafka relay "${this.name}": ${(error as Error).message}`,
        { cause: error },
      );
    });
    if (count === undefined) {
      throw new OutboxerError(
        'RELAY_MISCONFIGURED',
        `Kafka relay "${this.name}": topic "${topic}" does not exist. Create it (e.g. kafka-topics.sh --create --topic ${topic} --partitions 3), or fix the relay's topic option; the relay never creates topics.`,
      );
    }
  }

  async deliver(batch: readonly Envelope[], context: DeliveryContext): Promise<DeliveryOutcome[]> {
    // Abandoned before anything was sent: skipped, so no attempt is counted.
    if (context.signal.aborted) return batch.map(() => ({ ok: false, error: SKIPPED }));
    const { topic, maxBytes, adapter } = this.options;
    const drafts = draftRecords(
      batch,
      context.ordering,
      typeof topic === 'string' ? () => topic : topic,
      maxBytes,
    );
    if (!(await this.resolvePartitions(drafts, context.signal))) return outcomes(drafts);
    const ready = readyToSend(drafts);
    const isolate = ready.some((draft) => this.suspects.has(draft.envelope.id));
    const sends = planSends(ready, { maxBytes, partitionsPerSend: adapter.partitionsPerSend, isolate });
    if (!isolate && sends.length > 1 && keysStayInOneSend(sends))
      await this.sendTogether(sends, context.signal);
    else await this.sendInTurn(sends, context.signal, !isolate);
    if (isolate)
      for (const draft of ready) if (draft.state !== 'ready') this.suspects.delete(draft.envelope.id);
    return outcomes(drafts);
  }

  async stop(): Promise<void> {
    // The producer is the caller's: leave it open, but give a send in flight a moment to finish.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      laneOf(this.options.adapter.producer).idle(),
      new Promise((resolve) => (timer = setTimeout(resolve, STOP_GRACE))),
    ]);
    clearTimeout(timer);
  }

  /**
   * Looks up every topic of the batch, assigns partitions, fails the messages of missing topics.
   * False when the signal fired meanwhile (the messages not yet failed are then left unsent).
   */
  private async resolvePartitions(drafts: Draft[], signal: AbortSignal): Promise<boolean> {
    const topics = [...new Set(drafts.filter((d) => d.state === 'ready').map((d) => d.topic!))];
    const looked = await Promise.all(
      topics.map((t) =>
        this.partitions.lookup(t, signal).then(
          (count) => ({ count }),
          (error: unknown) => ({ error }),
        ),
      ),
    );
    const abandoned = looked.find(
      (result): result is { error: Abandoned } => 'error' in result && result.error instanceof Abandoned,
    );
    if (abandoned !== undefined) {
      for (const draft of drafts) if (draft.state === 'ready') draft.state = 'unsent';
      return false;
    }
    const counts = new Map<string, number>();
    const problems = new Map<string, unknown>();
    topics.forEach((t, i) => {
      const result = looked[i]!;
      if ('error' in result) problems.set(t, result.error);
      else if (result.count === undefined) problems.set(t, this.missingTopic(t));
      else counts.set(t, result.count);
    });
    for (const draft of drafts) {
      if (draft.state !== 'ready' || !problems.has(draft.topic!)) continue;
      draft.state = 'failed';
      draft.error = problems.get(draft.topic!);
    }
    assignPartitions(drafts, counts, (t, partitions) => {
      const next = (this.stickyCounters.get(t) ?? Math.floor(Math.random() * partitions)) + 1;
      this.stickyCounters.set(t, next % partitions);
      return next % partitions;
    });
    return true;
  }

  private missingTopic(topic: string): OutboxerError {
    const fix =
      typeof this.options.topic === 'string' ? "fix the relay's topic option" : 'fix the topic function';
    return new OutboxerError(
      'RELAY_MISCONFIGURED',
      `Kafka topic "${topic}" does not exist: create it, or ${fix}. The relay never creates topics.`,
      { retryable: true },
    );
  }

  /**
   * The sends of a batch one after another: a later one leaves out the messages of a group that
   * failed in an earlier one, and none goes after a transport failure.
   */
  private async sendInTurn(
    sends: readonly Draft[][],
    signal: AbortSignal,
    shareable: boolean,
  ): Promise<void> {
    const failedKeys = new Set<string>();
    for (const send of sends) {
      const records = send.filter((draft) => draft.orderKey === null || !failedKeys.has(draft.orderKey));
      if (records.length === 0) continue;
      const goOn = await this.send(records, signal, shareable, () => false);
      for (const draft of records)
        if (draft.state === 'failed' && draft.orderKey !== null) failedKeys.add(draft.orderKey);
      if (!goOn) break;
    }
  }

  /**
   * The sends of a batch queued at once, when no ordering key spans two of them: the lane combines
   * them with the other batches waiting. After a transport failure, those not yet in a request are
   * withdrawn, as {@link sendInTurn} would not have sent them.
   */
  private async sendTogether(sends: readonly Draft[][], signal: AbortSignal): Promise<void> {
    let halted = false;
    const withdrawn = (): boolean => halted;
    await Promise.all(
      sends.map(async (records) => {
        if (!(await this.send(records, signal, true, withdrawn))) halted = true;
      }),
    );
  }

  /**
   * One send through the producer's lane. Records the result on the drafts; returns whether the
   * next send of the batch may go (not after a transport failure or an abandoned send).
   */
  private async send(
    records: Draft[],
    signal: AbortSignal,
    shareable: boolean,
    halted: () => boolean,
  ): Promise<boolean> {
    const { adapter, maxBytes } = this.options;
    const contribution = {
      adapter,
      records: records.map(toRecord),
      ...partitionsAndBytes(records),
      maxBytes,
      shareable,
      withdrawn: () => signal.aborted || halted(),
      started: false,
    };
    try {
      const sent = await withDeadline(
        laneOf(adapter.producer).submit(contribution),
        Number.POSITIVE_INFINITY,
        signal,
        () => undefined,
        abandoned,
      );
      if (!sent) return this.mark(records, 'unsent');
      for (const draft of records) draft.state = 'landed';
      return true;
    } catch (error) {
      if (error instanceof Abandoned) {
        if (!contribution.started) return this.mark(records, 'unsent');
        // Sent but unconfirmed: it may still land. Reported failed, so it is sent again (a duplicate at worst).
        return this.mark(
          records,
          'failed',
          new DeliveryError(
            `The Kafka send had not finished when the batch was abandoned (${describeKafkaError(error.reason)}); ${adapter.client} may still deliver it in the background, and outboxer will send it again. Is Kafka reachable?`,
            { cause: error.reason },
          ),
        );
      }
      if (!(error instanceof KafkaSendError)) return this.mark(records, 'failed', error);
      return this.settleFailedSend(records, error);
    }
  }

  private settleFailedSend(records: Draft[], error: KafkaSendError): boolean {
    const byPartition = new Map<string, Draft[]>();
    for (const draft of records) {
      const id = partitionId(draft.topic!, draft.partition);
      let group = byPartition.get(id);
      if (group === undefined) byPartition.set(id, (group = []));
      group.push(draft);
    }
    // Transport trouble (a broker down, a timeout) ends the batch; a refusal of some records does not.
    let goOn = true;
    for (const [id, drafts] of byPartition) {
      const result = error.partitions.get(id);
      if (result?.landed === true) {
        this.mark(drafts, 'landed');
        continue;
      }
      const cause = result?.error ?? error.cause;
      const first = drafts[0]!;
      if (kafkaErrorNames(cause).some((name) => STALE_METADATA.includes(name)))
        this.partitions.invalidate(first.topic!);
      const failure = classifySendFailure(cause, {
        client: this.options.adapter.client,
        topic: first.topic!,
        partition: first.partition,
        records: drafts.length,
      });
      if (failure.isolate) {
        // Bounded: ids of messages that were discarded meanwhile never come back to be cleared.
        if (this.suspects.size > 10_000) this.suspects.clear();
        for (const draft of drafts) this.suspects.add(draft.envelope.id);
      }
      if (!(failure.error instanceof PermanentError) && !failure.isolate) goOn = false;
      this.mark(drafts, 'failed', failure.error);
    }
    return goOn;
  }

  private mark(drafts: Draft[], state: Draft['state'], error?: unknown): false {
    for (const draft of drafts) {
      draft.state = state;
      if (error !== undefined) draft.error = error;
    }
    return false;
  }
}

/**
 * The `topic:partition` ids of a send's records and its estimated bytes, in one pass. An id is
 * built when a record's partition differs from the one before it: once a send with kafkajs, whose
 * sends hold one partition each.
 */
function partitionsAndBytes(records: readonly Draft[]): { partitions: Set<string>; bytes: number } {
  const partitions = new Set<string>();
  let bytes = BATCH_OVERHEAD;
  let previous: Draft | undefined;
  for (const draft of records) {
    bytes += draft.bytes;
    if (previous !== undefined && previous.topic === draft.topic && previous.partition === draft.partition)
      continue;
    partitions.add(partitionId(draft.topic!, draft.partition));
    previous = draft;
  }
  return { partitions, bytes };
}

/** True when every ordering key of the batch is in one send: its sends may then go in any order. */
function keysStayInOneSend(sends: readonly Draft[][]): boolean {
  const sendOf = new Map<string, number>();
  for (let i = 0; i < sends.length; i += 1) {
    for (const draft of sends[i]!) {
      if (draft.orderKey === null) continue;
      const seen = sendOf.get(draft.orderKey);
      if (seen === undefined) sendOf.set(draft.orderKey, i);
      else if (seen !== i) return false;
    }
  }
  return true;
}

/**
 * One outcome per message, in batch order. After a failed message of an ordering key, the later ones
 * of that key are skipped, even if they were written: a written one goes out again later (a
 * duplicate), never ahead of the message it must follow.
 */
function outcomes(drafts: readonly Draft[]): DeliveryOutcome[] {
  const failedKeys = new Set<string>();
  return drafts.map((draft) => {
    const key = draft.orderKey;
    if (key !== null && failedKeys.has(key)) return { ok: false, error: SKIPPED };
    if (draft.state === 'landed') return { ok: true };
    if (key !== null) failedKeys.add(key);
    if (draft.state === 'failed') return { ok: false, error: draft.error };
    return { ok: false, error: SKIPPED }; // not attempted: left as it was, no attempt counted
  });
}
