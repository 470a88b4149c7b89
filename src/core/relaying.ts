/**
 * A relaying node's lifecycle: `start()` checks the configuration, starts the relays, listens for
 * NOTIFY wake-ups and starts one coordinator per outbox; `stop()` winds them down, each step
 * bounded. The relays here are the destinations (`Relay` objects), started once and stopped once.
 * While the listener is connected, idle workers of `notify` outboxes sleep until a notification;
 * while it is not, they poll every `pollInterval`.
 */
import { checkConfigurations } from './configuration.js';
import { OutboxCoordinator } from './coordinator.js';
import type { Listener } from './database.js';
import { describeError, OutboxerError } from './errors.js';
import type { Instance } from './instance.js';
import { LocalWakeUps, notifies } from './local-wakeups.js';
import { NOTIFY_CHANNEL, REBALANCE, rebalancePayload } from './notifications.js';
import type { ResolvedOutbox } from './options.js';
import type { Relay } from './relay.js';
import { settlesWithin } from './timing.js';
import type { WorkerDeps } from './worker/index.js';

export class RelayingNode {
  private coordinators = new Map<string, OutboxCoordinator>();
  private listener: Listener | undefined;
  /** The listener is connected: notifications arrive (see `WorkerDeps.listening`). */
  private listening = false;
  private state: 'idle' | 'starting' | 'running' | 'stopping' = 'idle';
  private destinationsStarting: Promise<void> | undefined;
  private readonly destinationsStarted = new Set<Relay>();
  /** Wakes this node's own workers after its publishes, where the database cannot notify. */
  private readonly localWakeUps = new LocalWakeUps((outbox, partition) =>
    this.coordinators.get(outbox)?.wake(partition),
  );

  constructor(
    private readonly instance: Instance<unknown, boolean>,
    /** Prunes an outbox: the coordinator of partition 0 calls it in its housekeeping. */
    private readonly prune: (outbox: ResolvedOutbox) => Promise<number>,
  ) {}

  /** What a worker of `outbox` needs (the coordinators', and manual testing mode's drain). */
  workerDeps(outbox: ResolvedOutbox): WorkerDeps {
    const { settings } = this.instance;
    return {
      adapter: this.instance.adapter,
      outbox,
      destination: outbox.relay!,
      instance: settings.name,
      leaseTimeout: settings.leaseTimeout,
      maxErrorLength: settings.maxErrorLength,
      logger: this.instance.logger,
      listening: () => this.listening,
    };
  }

  /** `notify` on a database with notifications: what a release, a join and a stop send. */
  private rebalanceNotify(outbox: ResolvedOutbox) {
    if (!outbox.notify || !this.instance.adapter.dialect.capabilities.notifications) return undefined;
    return { channel: NOTIFY_CHANNEL, payload: rebalancePayload(this.instance.settings.name, outbox.name) };
  }

  async start(): Promise<void> {
    const { outboxes, logger, nodeId } = this.instance;
    if (this.state !== 'idle')
      throw new OutboxerError('INVALID_STATE', `start() called while outboxer is ${this.state}.`);
    this.state = 'starting';
    try {
      await checkConfigurations(this.instance.engine, [...outboxes.values()], logger);
      await this.startDestinations();
      await this.listenForWakeUps();
      for (const outbox of outboxes.values()) {
        const coordinator = new OutboxCoordinator(
          this.workerDeps(outbox),
          nodeId,
          () => this.prune(outbox),
          this.rebalanceNotify(outbox),
        );
        this.coordinators.set(outbox.name, coordinator);
        await coordinator.start();
      }
      this.state = 'running';
    } catch (error) {
      this.state = 'running';
      await this.stop();
      throw error;
    }
  }

  /** Starts each relay once; a relay whose start failed is tried again next time, and is not stopped. */
  startDestinations(): Promise<void> {
    this.destinationsStarting ??= (async () => {
      for (const relay of new Set([...this.instance.outboxes.values()].map((o) => o.relay!))) {
        if (this.destinationsStarted.has(relay)) continue;
        await relay.start?.();
        this.destinationsStarted.add(relay);
      }
    })().finally(() => {
      this.destinationsStarting = undefined;
    });
    return this.destinationsStarting;
  }

  async stopDestinations(): Promise<void> {
    await this.destinationsStarting?.catch(() => undefined);
    const started = [...this.destinationsStarted];
    this.destinationsStarted.clear();
    for (const relay of started) await relay.stop?.();
  }

  /**
   * A notification `<instance>:<outbox>:<partition>` wakes that partition's worker on this node,
   * `<instance>:<outbox>:rebalance` its coordinator of the outbox. A listener that reconnects wakes
   * every worker, since notifications sent meanwhile are lost; one that disconnects too, so that
   * workers sleeping until a notification poll on `pollInterval` until it is back.
   */
  private async listenForWakeUps(): Promise<void> {
    const { adapter, outboxes, settings, logger } = this.instance;
    const notifying = [...outboxes.values()].some((o) => o.notify);
    if (!notifying || adapter.listen === undefined) return;
    const prefix = `${settings.name}:`;
    this.listener = await adapter.listen(NOTIFY_CHANNEL, {
      onNotification: (payload) => {
        if (!payload.startsWith(prefix)) return;
        const rest = payload.slice(prefix.length);
        const split = rest.lastIndexOf(':');
        const coordinator = this.coordinators.get(rest.slice(0, split));
        const last = rest.slice(split + 1);
        if (last === REBALANCE) coordinator?.rebalance();
        else coordinator?.wake(Number(last));
      },
      onStatus: (connected, error) => {
        this.listening = connected;
        for (const coordinator of this.coordinators.values())
          for (const worker of coordinator.workers.values()) worker.wake();
        if (!connected) {
          logger.warn('outboxer: notification listener disconnected; polling until it is back', {
            error: describeError(error, settings.maxErrorLength),
          });
        }
      },
    });
  }

  /**
   * What a publish of this instance wrote (outbox, partition), once its statements ran: a running
   * node wakes its own workers of those partitions whose outbox goes without NOTIFY (see
   * local-wakeups.ts); NOTIFY wakes the others.
   */
  published(partitions: Iterable<{ readonly outbox: string; readonly partition: number }>): void {
    if (this.state !== 'running') return;
    const adapter = this.instance.adapter;
    const outboxes = this.instance.outboxes;
    this.localWakeUps.published(
      [...partitions].filter(({ outbox }) => !notifies(adapter, outboxes.get(outbox))),
    );
  }

  /**
   * An operator's change made messages of `outbox` ready (`retryDead`, `discard` unblocking a
   * group): wakes this node's workers of it, which may sleep until a notification. Other nodes
   * find them at their coordinator's next heartbeat (`leaseTimeout / 3`), or their next poll.
   * Returns `count`.
   */
  changed(outbox: string, count: number): number {
    if (count > 0) for (const worker of this.coordinators.get(outbox)?.workers.values() ?? []) worker.wake();
    return count;
  }

  /**
   * Stops gracefully: every batch in flight is finished and settled (or, past `shutdownTimeout`,
   * abandoned unacknowledged), partitions are handed back, relays disconnected.
   */
  async stop(): Promise<void> {
    if (this.state === 'idle' || this.state === 'stopping') return;
    this.state = 'stopping';
    this.localWakeUps.clear();
    // Every step is bounded: with the database or a broker hanging, stop() still returns (the
    // leases then lapse by themselves after leaseTimeout).
    const { shutdownTimeout } = this.instance.settings;
    try {
      const coordinators = [...this.coordinators.values()];
      this.coordinators.clear();
      const stopped = await settlesWithin(
        Promise.all(coordinators.map((c) => c.stop(shutdownTimeout))),
        shutdownTimeout + 2000,
      );
      if (!stopped)
        this.instance.logger.warn(
          'outboxer: stop() gave up waiting for the database; leases will lapse on their own',
        );
      const listener = this.listener;
      this.listener = undefined;
      this.listening = false;
      if (listener !== undefined) await settlesWithin(listener.close(), 1000);
      await settlesWithin(this.stopDestinations(), shutdownTimeout);
    } finally {
      this.state = 'idle';
    }
  }
}
