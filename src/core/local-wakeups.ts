/**
 * In-process wake-ups, for databases without notifications (MySQL, SQLite): when an instance that
 * relays publishes, its own worker of each partition written is woken, so a message published and
 * relayed by the same process is picked up within milliseconds of its commit rather than at the
 * next `pollInterval`. A relay on another node still finds it by polling.
 *
 * `publish` returns before the caller commits, and outboxer cannot see the commit, so each
 * partition written is woken a few times over the next quarter second ({@link DELAYS}): a worker
 * that polls before the commit finds nothing and is woken again. Wake-ups of one partition are
 * coalesced: a publish while a series runs restarts nothing, so a busy writer adds at most
 * `DELAYS.length` polls per partition per series. Timers are unref'ed and cleared on `stop()`.
 */

/** Milliseconds after a publish at which its partitions' workers are woken. */
const DELAYS = [5, 40, 250];

export class LocalWakeUps {
  private readonly series = new Map<string, NodeJS.Timeout>();

  constructor(private readonly wake: (outbox: string, partition: number) => void) {}

  /** The partitions a publish wrote to. */
  published(partitions: Iterable<{ readonly outbox: string; readonly partition: number }>): void {
    for (const { outbox, partition } of partitions) {
      const key = `${outbox}\u0000${partition}`;
      if (!this.series.has(key)) this.schedule(key, outbox, partition, 0);
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
    this.series.set(key, timer);
  }

  /** Cancels every pending wake-up. */
  clear(): void {
    for (const timer of this.series.values()) clearTimeout(timer);
    this.series.clear();
  }
}
