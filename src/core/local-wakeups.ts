import type { DatabaseAdapter } from './database.js';
import type { ResolvedOutbox } from './options.js';

/**
 * In-process wake-ups, for outboxes without NOTIFY (on MySQL and SQLite, which have none, and on
 * Postgres while `notify` is off, its default): when an instance that relays publishes, its own
 * worker of each partition written is woken, so a message published and relayed by the same
 * process is picked up within milliseconds of its commit rather than at the next `pollInterval`.
 * A relay on another node still finds it by polling.
 *
 * `publish` returns before the caller commits, and outboxer cannot see the commit, so each
 * partition written is woken a few times over the next quarter second ({@link DELAYS}): a worker
 * that polls before the commit finds nothing and is woken again. A publish while the partition's
 * first wake-up is pending shares it; a later one starts the series again, so that every publish
 * is followed by a wake-up 5 ms after it. A steady writer thus costs one wake-up (at most one
 * poll) per message, and a writer faster than one publish every 5 ms one per 5 ms, whose poll
 * reads what was committed meanwhile; the later steps come once the writer pauses. Timers are
 * unref'ed and cleared on `stop()`.
 */

/** Whether NOTIFY wakes the relays of `outbox` (Postgres, `notify: true`): then no wake-up here is needed. */
export function notifies(database: DatabaseAdapter, outbox: ResolvedOutbox | undefined): boolean {
  return database.dialect.capabilities.notifications && outbox?.notify === true;
}

/** Milliseconds after a publish at which its partitions' workers are woken. */
const DELAYS = [5, 40, 250];

interface Series {
  timer: NodeJS.Timeout;
  /** The index in {@link DELAYS} of the wake-up the timer waits for. */
  step: number;
}

export class LocalWakeUps {
  private readonly series = new Map<string, Series>();

  constructor(private readonly wake: (outbox: string, partition: number) => void) {}

  /** The partitions a publish wrote to. */
  published(partitions: Iterable<{ readonly outbox: string; readonly partition: number }>): void {
    for (const { outbox, partition } of partitions) {
      const key = `${outbox}\u0000${partition}`;
      const running = this.series.get(key);
      if (running?.step === 0) continue;
      if (running !== undefined) clearTimeout(running.timer);
      this.schedule(key, outbox, partition, 0);
    }
  }

  private schedule(key: string, outbox: string, partition: number, step: number): void {
    const previous = step === 0 ? 0 : DELAYS[step - 1]!;
    const timer = setTimeout(() => {
      this.wake(outbox, partition);
      if (step + 1 < DELAYS.length) this.schedule(key, outbox, partition, step + 1);
      else this.series.delete(key);
    }, DELAYS[step]! - previous);
    timer.unref();
    this.series.set(key, { timer, step });
  }

  /** Cancels every pending wake-up. */
  clear(): void {
    for (const { timer } of this.series.values()) clearTimeout(timer);
    this.series.clear();
  }
}
