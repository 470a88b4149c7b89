import { describeError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Inbox } from './inbox.js';
import type { ResolvedInbox } from './options.js';

/**
 * Prunes expired ids of each inbox every `pruneInterval` on a relaying node. Every relaying node
 * prunes (the statement skips rows another node is deleting), so no lease is needed: a node that
 * dies leaves the work to the others.
 */
export class InboxPruner {
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly running = new Set<Promise<unknown>>();

  constructor(
    private readonly inboxes: ReadonlyArray<{ options: ResolvedInbox; inbox: Inbox<unknown, boolean> }>,
    private readonly logger: Logger,
  ) {}

  start(): void {
    for (const { options, inbox } of this.inboxes) {
      const timer = setInterval(() => this.prune(options, inbox), options.pruneInterval);
      timer.unref();
      this.timers.push(timer);
    }
  }

  async stop(): Promise<void> {
    for (const timer of this.timers.splice(0)) clearInterval(timer);
    await Promise.all(this.running);
  }

  private prune(options: ResolvedInbox, inbox: Inbox<unknown, boolean>): void {
    const pruning = inbox
      .prune()
      .catch((error: unknown) => {
        this.logger.error('outboxer: pruning the inbox failed; retrying', {
          inbox: options.name,
          error: describeError(error, 500),
        });
      })
      .finally(() => this.running.delete(pruning));
    this.running.add(pruning);
  }
}
