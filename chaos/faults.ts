/**
 * The fault schedule of a chaos run, drawn from its seed: every kind of fault at least once, in a
 * shuffled order, then more shuffled rounds until the fault window is full.
 */
import type { ChaosDatabase } from './database.js';
import { random } from './random.js';

export const FAULT_KINDS = [
  'relay-sigkill-mid-batch',
  'relay-sigkill',
  'relay-sigterm',
  'relay-pause',
  'db-restart',
  'db-crash',
  'db-terminate',
  'db-freeze',
  'destination-down',
  'destination-slow',
  'publisher-kill-before-commit',
  'publisher-kill-after-commit',
  'publisher-sigkill',
] as const;

/**
 * The faults of the inbox's end-to-end proof, played only in a run with a broker of its own
 * (`CHAOS_BROKER`): a run without one draws the same schedule from a seed as before.
 */
export const BROKER_FAULT_KINDS = ['consumer-sigkill', 'consumer-kill-after-commit', 'broker-pause'] as const;

export type FaultKind = (typeof FAULT_KINDS)[number] | (typeof BROKER_FAULT_KINDS)[number];

/** What each fault does, for the report and docs/reliability.md; the database's own faults from `database`. */
export function faultDescriptions(database: ChaosDatabase): Record<FaultKind, string> {
  return {
    'relay-sigkill-mid-batch':
      'a relay SIGKILLs itself after writing part of a batch to the destination, before acknowledging it',
    'relay-sigkill': 'SIGKILL of a relay at a random moment',
    'relay-sigterm': 'SIGTERM of a relay: graceful stop() (rolling deploy), then a new process',
    'relay-pause': 'SIGSTOP of a relay for longer than leaseTimeout, then SIGCONT (a zombie worker)',
    ...database.faults,
    'destination-down': 'the destination cuts every connection and refuses new ones for seconds',
    'destination-slow': 'the destination delays every packet by 50-300 ms for seconds',
    'publisher-kill-before-commit': 'a publisher SIGKILLs itself after publishing, before COMMIT',
    'publisher-kill-after-commit': 'a publisher SIGKILLs itself right after COMMIT returned',
    'publisher-sigkill': 'SIGKILL of a publisher at a random moment (transactions in flight)',
    'consumer-sigkill': 'SIGKILL of an inbox consumer at a random moment (transactions in flight)',
    'consumer-kill-after-commit':
      'an inbox consumer SIGKILLs itself right after a COMMIT, before the broker hears the acknowledgement',
    'broker-pause':
      "SIGSTOP of the run's own broker for seconds (past Kafka's consumer session timeout at times), then SIGCONT",
  };
}

export interface ScheduledFault {
  kind: FaultKind;
  /** Milliseconds after the start of the fault phase. */
  at: number;
  /** How long the fault lasts (outages, pauses, slowness), in milliseconds. */
  duration: number;
  /** Which child it targets: an index into the live relays or publishers at that moment. */
  target: number;
  /** Added latency of `destination-slow`. */
  delayMs: number;
}

export function faultSchedule(
  seed: number,
  seconds: number,
  kinds: readonly FaultKind[] = FAULT_KINDS,
): ScheduledFault[] {
  const rnd = random(seed ^ 0x5eed);
  const total = seconds * 1000;
  const start = Math.min(8000, Math.max(3000, total * 0.08));
  const end = total - Math.min(15_000, Math.max(8000, total * 0.12));
  const faults: ScheduledFault[] = [];
  const make = (kind: FaultKind, at: number): ScheduledFault => ({
    kind,
    at: Math.round(at),
    duration:
      kind === 'destination-down'
        ? rnd.int(3000, 8000)
        : kind === 'destination-slow'
          ? rnd.int(4000, 10_000)
          : kind === 'relay-pause'
            ? rnd.int(4500, 7000)
            : kind === 'broker-pause'
              ? rnd.int(3000, 15_000)
              : kind === 'db-freeze'
                ? rnd.int(2000, 5000)
                : 0,
    target: rnd.int(0, 1000),
    delayMs: rnd.int(50, 300),
  });
  const round = kinds.length;
  const firstGap = (end - start) / round;
  if (firstGap < 12_000) {
    // A short run: one of each, evenly spread.
    rnd.shuffle(kinds).forEach((kind, i) => faults.push(make(kind, start + i * firstGap)));
    return faults;
  }
  let at = start;
  while (at < end) {
    for (const kind of rnd.shuffle(kinds)) {
      if (at >= end) break;
      faults.push(make(kind, at));
      at += rnd.int(6000, 16_000);
    }
  }
  return faults;
}

/** A fault as the fault player played it. */
export interface FaultRecord {
  kind: FaultKind;
  /** The child it hit (relay or publisher label), if any. */
  target?: string;
  start: number;
  end: number;
  detail?: string;
}
