/**
 * Subscribes to the delivery events of one outboxer instance on `node:diagnostics_channel`, for
 * counters and histograms. Shared by `outboxer/opentelemetry` and `outboxer/prometheus`; it imports
 * neither.
 */
import diagnostics from 'node:diagnostics_channel';

export interface BatchStopEvent {
  readonly instance: string;
  readonly outbox: string;
  readonly partition: number;
  readonly size: number;
  readonly delivered: number;
  readonly failed: number;
  readonly aborted: boolean;
  /** Milliseconds. */
  readonly duration: number;
}

export interface MessageEvent {
  readonly instance: string;
  readonly outbox: string;
  readonly partition: number;
  readonly id: number;
  readonly groupKey: string | null;
  readonly attempts: number;
  readonly error: string;
}

export interface DeliveryEventHandlers {
  batchStop(event: BatchStopEvent): void;
  retry(event: MessageEvent): void;
  dead(event: MessageEvent): void;
  error(event: { instance: string; outbox: string }): void;
}

/**
 * Calls the handlers for events of instance `instance` on the given outboxes. Returns the
 * function that unsubscribes.
 */
export function subscribeDeliveryEvents(
  instance: string,
  outboxes: ReadonlySet<string>,
  handlers: DeliveryEventHandlers,
): () => void {
  const mine = (event: unknown): boolean => {
    const e = event as { instance?: unknown; outbox?: unknown };
    return e.instance === instance && typeof e.outbox === 'string' && outboxes.has(e.outbox);
  };
  const subscriptions: Array<[string, (event: unknown) => void]> = [
    ['outboxer:batch:stop', (event) => mine(event) && handlers.batchStop(event as BatchStopEvent)],
    ['outboxer:message:retry', (event) => mine(event) && handlers.retry(event as MessageEvent)],
    ['outboxer:message:dead', (event) => mine(event) && handlers.dead(event as MessageEvent)],
    [
      'outboxer:error',
      (event) => mine(event) && handlers.error(event as { instance: string; outbox: string }),
    ],
  ];
  for (const [name, listener] of subscriptions) diagnostics.subscribe(name, listener);
  return () => {
    for (const [name, listener] of subscriptions) diagnostics.unsubscribe(name, listener);
  };
}
