/**
 * Turning what the Kafka clients throw into outboxer's error classes: permanent for records the broker
 * will never take, RELAY_MISCONFIGURED for what an operator must fix, retryable for the rest.
 */
import { DeliveryError, OutboxerError, PermanentError } from '../../core/errors.js';

/** Kafka protocol errors about the records themselves: sending the same bytes again cannot help. */
const RECORD_ERRORS = new Set([
  'MESSAGE_TOO_LARGE',
  'RECORD_LIST_TOO_LARGE',
  'INVALID_RECORD',
  'CORRUPT_MESSAGE',
  'INVALID_TIMESTAMP',
]);

/** Errors an operator fixes (create the topic, grant the ACL, fix credentials); then a retry works. */
const MISCONFIGURATION_HINTS: Readonly<Record<string, string>> = {
  UNKNOWN_TOPIC_OR_PARTITION: "the topic does not exist: create it, or fix the relay's topic option",
  TOPIC_AUTHORIZATION_FAILED:
    'the producer is not allowed to write to the topic: grant it WRITE on the topic',
  CLUSTER_AUTHORIZATION_FAILED:
    'the producer lacks IDEMPOTENT_WRITE on the cluster (needed by idempotent producers on older brokers)',
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED: 'the producer is not allowed to use its transactional id',
  SASL_AUTHENTICATION_FAILED: "the broker rejected the credentials: check the producer's sasl options",
  ILLEGAL_SASL_STATE: "SASL authentication failed: check the producer's sasl options",
  UNSUPPORTED_SASL_MECHANISM: 'the broker does not support the SASL mechanism the producer uses',
};

/** Kafka protocol errors that say the broker did not accept the producer's SASL authentication. */
const AUTHENTICATION_ERRORS = [
  'SASL_AUTHENTICATION_FAILED',
  'ILLEGAL_SASL_STATE',
  'UNSUPPORTED_SASL_MECHANISM',
];

/** Walks an error and what it wraps (`errors` of aggregates, `cause`), depth-first, at most 200 nodes. */
function* errorTree(error: unknown): Generator<Record<string, unknown>> {
  const stack: unknown[] = [error];
  const seen = new Set<unknown>();
  while (stack.length > 0 && seen.size < 200) {
    const node = stack.pop();
    if (typeof node !== 'object' || node === null || seen.has(node)) continue;
    seen.add(node);
    const record = node as Record<string, unknown>;
    yield record;
    if (record.cause !== undefined) stack.push(record.cause);
    if (Array.isArray(record.errors)) stack.push(...[...record.errors].reverse());
  }
}

/**
 * The Kafka protocol error names found in an error (`MESSAGE_TOO_LARGE`…): @platformatic/kafka puts
 * them in `apiId`, kafkajs in `type`.
 */
export function kafkaErrorNames(error: unknown): string[] {
  const names = new Set<string>();
  for (const node of errorTree(error)) {
    for (const field of ['apiId', 'type']) {
      const value = node[field];
      if (typeof value === 'string' && /^[A-Z][A-Z_]+$/.test(value)) names.add(value);
    }
  }
  return [...names];
}

/**
 * What to fix when an error says Kafka refused the producer's SASL authentication (a protocol error,
 * kafkajs' KafkaJSSASLAuthenticationError, @platformatic/kafka's AuthenticationError), or
 * `undefined` for any other error.
 */
export function authenticationFailure(error: unknown): string | undefined {
  const name = kafkaErrorNames(error).find((n) => AUTHENTICATION_ERRORS.includes(n));
  if (name !== undefined) return `${name}: ${MISCONFIGURATION_HINTS[name]}`;
  for (const node of errorTree(error)) {
    if (node.name === 'KafkaJSSASLAuthenticationError' || node.code === 'PLT_KFK_AUTHENTICATION')
      return MISCONFIGURATION_HINTS.SASL_AUTHENTICATION_FAILED;
  }
  return undefined;
}

/** The leaf messages of an error tree, deduplicated: what to show a human. */
export function describeKafkaError(error: unknown): string {
  const messages: string[] = [];
  for (const node of errorTree(error)) {
    const hasChildren = node.cause !== undefined || (Array.isArray(node.errors) && node.errors.length > 0);
    const message = typeof node.message === 'string' ? node.message : undefined;
    if (
      message !== undefined &&
      message !== '' &&
      (!hasChildren || messages.length === 0) &&
      !messages.includes(message)
    ) {
      messages.push(message);
    }
  }
  if (messages.length === 0) return String(error);
  const [head, ...rest] = messages;
  return rest.length === 0 ? head! : `${head} (${rest.slice(0, 3).join('; ')})`;
}

export interface SendFailureScope {
  readonly client: string;
  readonly topic: string;
  readonly partition: number;
  /** How many records of this send were in that partition. */
  readonly records: number;
}

/** What a send failure means for the records of one partition. */
export interface ClassifiedFailure {
  readonly error: unknown;
  /**
   * The broker refused the partition's records as a whole for something one of them may cause: send
   * them one by one next time to find the culprit.
   */
  readonly isolate: boolean;
}

/** Classifies the failure of one topic-partition of a send. */
export function classifySendFailure(error: unknown, scope: SendFailureScope): ClassifiedFailure {
  const names = kafkaErrorNames(error);
  const where = `topic "${scope.topic}" partition ${scope.partition}`;
  const detail = describeKafkaError(error);
  const recordError = names.find((name) => RECORD_ERRORS.has(name));
  if (recordError !== undefined) {
    if (scope.records === 1) {
      const hint =
        recordError === 'MESSAGE_TOO_LARGE' || recordError === 'RECORD_LIST_TOO_LARGE'
          ? " The topic's max.message.bytes (or the broker's message.max.bytes) is lower than the message; raise it, or lower the relay's maxBytes so that such messages fail before they are sent."
          : '';
      return {
        error: new PermanentError(`Kafka rejected the message for good on ${where}: ${recordError}.${hint}`, {
          cause: error,
        }),
        isolate: false,
      };
    }
    return {
      error: new DeliveryError(
        `Kafka rejected ${scope.records} messages on ${where} together (${recordError}); they will be sent one at a time next to find the one it does not accept.`,
        { cause: error },
      ),
      isolate: true,
    };
  }
  if (names.includes('INVALID_TOPIC_EXCEPTION')) {
    return {
      error: new PermanentError(`Kafka rejected the topic name "${scope.topic}" (INVALID_TOPIC_EXCEPTION).`, {
        cause: error,
      }),
      isolate: false,
    };
  }
  const misconfigured = names.find((name) => MISCONFIGURATION_HINTS[name] !== undefined);
  if (misconfigured !== undefined) {
    return {
      error: new OutboxerError(
        'RELAY_MISCONFIGURED',
        `Kafka refused the send to ${where} (${misconfigured}): ${MISCONFIGURATION_HINTS[misconfigured]}.`,
        { cause: error, retryable: true },
      ),
      isolate: false,
    };
  }
  return {
    error: new DeliveryError(`${scope.client} could not send to ${where}: ${detail}`, { cause: error }),
    isolate: false,
  };
}
