/**
 * What every process of a chaos run agrees on: the outboxes (one per mode under test), their
 * options, the tables, and the messages the harness sends its children.
 */
import type { OutboxOptions } from 'outboxer';
import type { BrokerEnvironment, BrokerKind } from './broker.js';
import type { DatabaseKind } from './database.js';

/** Instance name shared by publishers and relays (part of the NOTIFY payload). */
export const INSTANCE_NAME = 'chaos';
export const OUTBOX_TABLE = 'chaos_messages';
export const LEASE_TIMEOUT = 3000;
export const SHUTDOWN_TIMEOUT = 5000;
export const MAX_ERROR_LENGTH = 500;
/** A graceful stop must return within this many milliseconds (shutdownTimeout + settle + slack). */
export const STOP_BOUND = SHUTDOWN_TIMEOUT + LEASE_TIMEOUT + 7000;

export interface OutboxMode {
  readonly name: string;
  /** 'broker': the inbox's end-to-end proof, relayed with outboxer's relay to the run's own broker. */
  readonly destination: 'table' | 'kafka' | 'broker';
  readonly strict: boolean;
  readonly notify: boolean;
  /** Share of the messages published into it. */
  readonly weight: number;
  /**
   * 'park': a dead message holds its group until the harness's operator decides (see `operate`
   * in run.ts): a poison message is discarded, any other revived with retryDead.
   */
  readonly onDead?: 'park';
}

/**
 * One outbox per combination: strict and dead-letter, notify on and off, dead messages parked;
 * Kafka when it answers.
 */
export const OUTBOX_MODES: readonly OutboxMode[] = [
  { name: 'strict_notify', destination: 'table', strict: true, notify: true, weight: 3 },
  { name: 'strict_poll', destination: 'table', strict: true, notify: false, weight: 2 },
  { name: 'dlq_notify', destination: 'table', strict: false, notify: true, weight: 2 },
  { name: 'dlq_poll', destination: 'table', strict: false, notify: false, weight: 2 },
  { name: 'park_notify', destination: 'table', strict: false, notify: true, weight: 2, onDead: 'park' },
  { name: 'kafka_strict', destination: 'kafka', strict: true, notify: true, weight: 2 },
];

export const DLQ_MAX_ATTEMPTS = 8;

/** The operator's decisions, one JSON line each (`{ action, outbox, id, at }`), in the run directory. */
export const OPERATOR_LOG = 'operator.jsonl';

export interface OperatorAction {
  action: 'discard' | 'retry';
  outbox: string;
  id: number;
  at: number;
}

/** The outbox relayed to the run's own broker (`CHAOS_BROKER`), consumed through the inbox. */
export function brokerMode(kind: BrokerKind): OutboxMode {
  return { name: `inbox_${kind}`, destination: 'broker', strict: true, notify: true, weight: 3 };
}

/**
 * The outboxes of a run, with the broker's when `broker` is set. On a database without notifications (MySQL) every outbox polls:
 * `park_notify` and `kafka_strict` run as `park_poll` and `kafka_strict` without `notify`, and
 * `strict_notify` and `dlq_notify` are left out, since they would be `strict_poll` and `dlq_poll`
 * again.
 */
export function activeModes(kafka: boolean, notifications = true, broker?: BrokerKind): OutboxMode[] {
  const modes = [...OUTBOX_MODES, ...(broker === undefined ? [] : [brokerMode(broker)])];
  return modes
    .filter((m) => kafka || m.destination !== 'kafka')
    .flatMap((m): OutboxMode[] => {
      if (notifications || !m.notify) return [m];
      if (m.onDead === 'park') return [{ ...m, name: 'park_poll', notify: false }];
      if (m.destination !== 'table') return [{ ...m, notify: false }];
      return [];
    });
}

/** Options of one outbox, without its relay (publishers are publish-only instances). */
export function outboxOptions(mode: OutboxMode): OutboxOptions {
  return {
    table: OUTBOX_TABLE,
    partitions: 4,
    batchSize: 50,
    pollInterval: mode.notify ? 1000 : 200,
    notify: mode.notify,
    maxAttempts: mode.strict ? Infinity : DLQ_MAX_ATTEMPTS,
    onDead: mode.onDead ?? 'continue',
    backoff: { min: 100, max: 2000 },
    deliveryTimeout: 15_000,
    // The final check compares counts()'s tallies with the rows: as the statements wrote them, never
    // corrected by a recount (the first would come a day after the outbox's first relay started).
    recountInterval: 24 * 3_600_000,
  };
}

/** Groups per outbox; each has a row in `orders` whose lock serialises its publishers. */
export const GROUPS_PER_OUTBOX = 150;

export function groupKey(outbox: string, index: number): string {
  // Some keys are unicode, to carry it through every hop.
  return index % 7 === 3 ? `${outbox}:ordre-${index}-é✓` : `${outbox}:g${index}`;
}

/** The payload every publisher writes. `failTimes`/`poison` steer the destination. */
export interface ChaosPayload {
  /** Position of the message in its group, in commit order (1, 2, …), or 0 when unordered. */
  seq: number;
  publisher: string;
  /** The destination rejects the first `failTimes` attempts. */
  failTimes?: number;
  /** The destination always rejects it (dead-letter outboxes only). */
  poison?: boolean;
  pad: string;
}

/** Control messages from the harness to its children (over the IPC channel). */
export type ControlMessage =
  | { type: 'kill'; when: 'mid-batch' }
  | { type: 'kill'; when: 'before-commit' | 'after-commit' }
  | { type: 'destination'; mode: 'up' | 'down' | 'slow'; delayMs?: number };

/** Connection details handed to children through the environment (CHAOS_ENV, JSON). */
export interface ChildEnvironment {
  /** The outbox's database (database.ts). */
  db: DatabaseKind;
  appUrl: string;
  /** The sink database, reached through the fault proxy. */
  sinkUrl: string;
  kafka: { brokers: string[]; topic: string } | null;
  /** The run's own broker and the consumer's database (`CHAOS_BROKER`), or null. */
  broker: BrokerEnvironment | null;
  runDir: string;
  seed: number;
  /** Messages per second this publisher aims for. */
  rate: number;
  /** Share of the dead-letter outboxes' messages that the destination always refuses. */
  poison: number;
  writers: number;
}

export function childEnvironment(): ChildEnvironment {
  const raw = process.env.CHAOS_ENV;
  if (!raw) throw new Error('CHAOS_ENV is not set: chaos processes are started by chaos/run.ts');
  return JSON.parse(raw) as ChildEnvironment;
}

/** Canonical text of what a message carries, hashed on both ends to catch corruption. */
export function contentOf(payload: unknown, headers: unknown): string {
  return `${JSON.stringify(payload)}|${JSON.stringify(headers ?? {})}`;
}
