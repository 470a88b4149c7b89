/**
 * The chaos run's child processes: three relays, the publishers and the broker's consumers, each
 * in a Slot that starts it again after a fault; their exits, and the graceful stops measured.
 */
import type { ChildProcess } from 'node:child_process';
import { BROKER_CONSUMERS } from './broker.js';
import { Slot, killAll, type Exit, type SlotContext } from './children.js';
import type { ChildEnvironment } from './config.js';
import type { DatabaseKind } from './database.js';
import type { PreparedServers } from './run-servers.js';
import type { RunSettings } from './run-settings.js';

/** A graceful stop (SIGTERM) of a relay, as the harness and the relay's summary saw it. */
export interface StopRecord {
  label: string;
  stopMs: number | null;
  exitMs: number;
  code: number | null;
  loopMaxMs?: number;
}

export class RunChildren {
  readonly all = new Set<ChildProcess>();
  readonly exits: Exit[] = [];
  readonly stops: StopRecord[] = [];
  relays: Slot[] = [];
  publishers: Slot[] = [];
  consumers: Slot[] = [];
  private readonly slotContext: SlotContext;

  constructor(private readonly settings: RunSettings) {
    this.slotContext = {
      codeRoot: settings.codeRoot,
      runDir: settings.runDir,
      children: this.all,
      exits: this.exits,
    };
  }

  killAll(): void {
    killAll(this.all);
  }

  /**
   * Starts the relays and the consumers, waits until they are ready, then the publishers: the
   * fault phase starts when this returns.
   */
  async start(kind: DatabaseKind, servers: PreparedServers, withBroker: boolean): Promise<void> {
    const { seed, rate, publisherCount, poison, writers, runDir, log } = this.settings;
    const childEnv = (extra: Partial<ChildEnvironment> = {}): ChildEnvironment => ({
      db: kind,
      appUrl: servers.appUrl,
      sinkUrl: `postgres://postgres@127.0.0.1:${servers.proxy.port}/chaos_sink`,
      kafka: servers.kafka,
      broker: servers.brokerEnv,
      runDir,
      seed,
      rate: rate / publisherCount,
      poison,
      writers,
      ...extra,
    });
    const slotContext = this.slotContext;
    this.relays = ['r1', 'r2', 'r3'].map(
      (name) => new Slot(name, 'relay.ts', () => [], childEnv(), slotContext),
    );
    let publisherSeed = seed;
    this.publishers = Array.from(
      { length: publisherCount },
      (_, i) =>
        new Slot(
          `p${i + 1}`,
          'publisher.ts',
          () => [String((publisherSeed += 7919))],
          childEnv(),
          slotContext,
        ),
    );
    this.consumers = Array.from(
      { length: withBroker ? BROKER_CONSUMERS : 0 },
      (_, i) => new Slot(`c${i + 1}`, 'consumer.ts', () => [String(i)], childEnv(), slotContext),
    );
    for (const slot of [...this.relays, ...this.consumers]) slot.start();
    await Promise.all([...this.relays, ...this.consumers].map((s) => s.ready));
    log(this.consumers.length > 0 ? 'relays and consumers ready' : 'relays ready');
    for (const slot of this.publishers) slot.start();
    await Promise.all(this.publishers.map((s) => s.ready));
    log('publishers ready: the fault phase starts');
  }
}
