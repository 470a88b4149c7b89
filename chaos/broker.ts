/**
 * The broker of the inbox's end-to-end proof (`CHAOS_BROKER=kafka|rabbitmq`): a throwaway server
 * that this run starts on ports of its own (the faults pause it, and the shared brokers on 9092 and
 * 5672 serve other people's tests), the outbox relayed to it with outboxer's relay, and consumer
 * processes that feed an inbox through outboxer's receivers. See docs/reliability.md.
 */
import { KafkaServer } from './kafka-server.js';
import { RabbitMqServer } from './rabbitmq-server.js';

export type BrokerKind = 'kafka' | 'rabbitmq';

/** What the relays and consumers of a run need to reach the broker and the consumer's database. */
export interface BrokerEnvironment {
  kind: BrokerKind;
  /** Kafka: `host:port`; RabbitMQ: an `amqp://` URL. */
  url: string;
  /** The Kafka topic, or the RabbitMQ exchange. */
  destination: string;
  /**
   * RabbitMQ: one queue per consumer process, each group routed to one of them (see `queueOf`),
   * so that one consumer at a time reads a group. Kafka: empty (the consumer group shares the
   * topic's partitions).
   */
  queues: string[];
  /** The consumer's database (Postgres): the inbox and the effects table. */
  consumerUrl: string;
}

/** A throwaway broker on ports of 127.0.0.1 nobody else uses. */
export interface ChaosBroker {
  readonly kind: BrokerKind;
  readonly label: string;
  /** The server's log, kept in the run directory. */
  readonly logFile: string;
  /** Starts the server and declares the topic (Kafka) or the exchange and queues (RabbitMQ). */
  create(consumers: number): Promise<void>;
  environment(consumerUrl: string): BrokerEnvironment;
  /** SIGSTOP (true) or SIGCONT (false) of the server's processes: a hung broker. */
  pause(paused: boolean): void;
  /**
   * How many records the broker holds (Kafka: the sum of the topic's end offsets), to count the
   * duplicates it carried; undefined where a broker forgets what was consumed (RabbitMQ).
   */
  recordsCarried(): Promise<number | undefined>;
  /** Synchronous, for exit handlers: kill the server, remove its directory. */
  destroySync(): void;
}

/** The inbox of the consumers, and the outbox relayed to the broker. */
export const INBOX_NAME = 'chaos';
export const BROKER_CONSUMERS = 2;

export function brokerKind(value = process.env.CHAOS_BROKER): BrokerKind | undefined {
  if (value === undefined || value === '' || value === '0') return undefined;
  if (value === 'kafka' || value === 'rabbitmq') return value;
  throw new Error(`CHAOS_BROKER must be kafka or rabbitmq, not ${JSON.stringify(value)}`);
}

export function chaosBroker(kind: BrokerKind, seed: number): ChaosBroker {
  return kind === 'kafka' ? new KafkaServer() : new RabbitMqServer(seed);
}

/** The RabbitMQ queue of a group (or of an ungrouped message, by its id): FNV-1a of the key. */
export function queueOf(queues: readonly string[], key: string): string {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(key)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return queues[hash % queues.length]!;
}
