import { PermanentError } from '../../core/errors.js';
import type { DeliveryOutcome, Envelope, Relay } from '../../core/relay.js';
import { payloadJson } from '../../core/payload.js';
import { CheckedNames } from '../shared/checked-names.js';
import { within } from '../shared/deadline.js';
import { standardHeaders } from '../shared/headers.js';
import { deliverInWaves } from '../shared/waves.js';
import { publishFailure, startCheckFailure, type NatsHeadersLike } from './nats-client.js';
import {
  resolveNatsOptions,
  subjectProblem,
  type NatsRelayOptions,
  type ResolvedNatsOptions,
} from './nats-options.js';

/**
 * A relay that publishes to NATS JetStream and counts a message as delivered when its PubAck
 * arrived (a `duplicate` PubAck too: the stream already has it).
 *
 * Each message carries `Nats-Msg-Id` = outbox id, so the stream drops a redelivery within its
 * duplicate window (2 minutes by default), the standard outboxer headers, and the JSON payload as
 * data. With `strictOrder` (the default) a group never has two messages waiting for a PubAck.
 *
 * @example
 * import { connect, headers } from '@nats-io/transport-node';
 * import { jetstream } from '@nats-io/jetstream';
 * import { natsRelay } from 'outboxer/nats';
 *
 * const nc = await connect({ servers: '127.0.0.1:4222', maxReconnectAttempts: -1 });
 * const relay = natsRelay({ jetstream: jetstream(nc), createHeaders: headers, subject: 'orders.events' });
 */
export function natsRelay<H extends NatsHeadersLike>(options: NatsRelayOptions<H>): Relay {
  // From here on the header type does not matter: what createHeaders makes goes back to publish.
  const resolved = resolveNatsOptions(options);
  return {
    name: resolved.name,
    start: () => checkStream(resolved),
    deliver: (batch, context) =>
      deliverInWaves(batch, context, (wave) => publishWave(wave, resolved, context.signal), {
        perKey: resolved.strictOrder ? 1 : Infinity,
      }),
  };
}

/** Publishes a wave together (NATS keeps the order of one connection) and waits for every PubAck. */
async function publishWave(
  wave: readonly Envelope[],
  options: ResolvedNatsOptions,
  signal: AbortSignal,
): Promise<DeliveryOutcome[]> {
  const outcomes = new Array<DeliveryOutcome | undefined>(wave.length);
  // Usually one subject, or a few, for every message of the wave.
  const subjects = new CheckedNames(subjectProblem);
  const acked = wave.map((envelope, index) =>
    publishOne(envelope, options, subjects).then((outcome) => {
      outcomes[index] = outcome;
    }),
  );
  try {
    // The client times each publish out by itself; this only stops waiting when the batch is abandoned.
    await within(
      Promise.all(acked),
      options.timeout + 1000,
      signal,
      `waiting for ${wave.length} JetStream PubAck(s)`,
    );
  } catch (error) {
    return Array.from(outcomes, (outcome) => outcome ?? { ok: false, error });
  }
  return outcomes as DeliveryOutcome[];
}

async function publishOne(
  envelope: Envelope,
  options: ResolvedNatsOptions,
  subjects: CheckedNames,
): Promise<DeliveryOutcome> {
  let subject: string;
  let headers: NatsHeadersLike;
  let msgID: string;
  try {
    subject = subjectOf(envelope, options, subjects);
    msgID = messageIdOf(envelope, options);
    headers = options.createHeaders();
    const standard = standardHeaders(envelope);
    for (const name in standard) headers.set(name, standard[name]!);
  } catch (error) {
    return {
      ok: false,
      error: error instanceof PermanentError ? error : publishFailure(error, '', options.timeout),
    };
  }
  try {
    await options.jetstream.publish(subject, payloadJson(envelope), {
      msgID,
      headers,
      timeout: options.timeout,
    });
    return { ok: true };
  } catch (error) {
    return { ok: false, error: publishFailure(error, subject, options.timeout) };
  }
}

function subjectOf(envelope: Envelope, options: ResolvedNatsOptions, subjects: CheckedNames): string {
  let subject: unknown;
  try {
    subject = options.subject(envelope);
  } catch (error) {
    throw new PermanentError(
      `natsRelay.subject threw for message ${envelope.id}: ${String((error as Error)?.message ?? error)}`,
      { cause: error },
    );
  }
  const problem = subjects.problem(subject);
  if (problem !== undefined) {
    throw new PermanentError(
      `natsRelay.subject returned ${JSON.stringify(subject)} for message ${envelope.id}, which cannot be published to: ${problem}.`,
    );
  }
  return subject as string;
}

function messageIdOf(envelope: Envelope, options: ResolvedNatsOptions): string {
  let id: unknown;
  try {
    id = options.messageId(envelope);
  } catch (error) {
    throw new PermanentError(
      `natsRelay.messageId threw for message ${envelope.id}: ${String((error as Error)?.message ?? error)}`,
      { cause: error },
    );
  }
  if (typeof id !== 'string' || id.length === 0 || /[\r\n]/.test(id)) {
    throw new PermanentError(
      `natsRelay.messageId returned ${JSON.stringify(id)} for message ${envelope.id}; a Nats-Msg-Id is a non-empty string without line breaks.`,
    );
  }
  return id;
}

/**
 * Checks that a stream captures the fixed subject. A missing stream or JetStream being off is
 * RELAY_MISCONFIGURED; a server that does not answer is not (it may be down for a while, and
 * batches keep trying).
 */
async function checkStream(options: ResolvedNatsOptions): Promise<void> {
  const subject = options.fixedSubject;
  if (!options.checkStream || subject === undefined) return;
  try {
    const manager = await within(
      options.jetstream.jetstreamManager(),
      options.timeout,
      undefined,
      'opening the JetStream manager',
    );
    await within(manager.streams.find(subject), options.timeout, undefined, 'looking up the stream');
  } catch (error) {
    const misconfigured = startCheckFailure(error, subject);
    if (misconfigured !== undefined) throw misconfigured;
  }
}
