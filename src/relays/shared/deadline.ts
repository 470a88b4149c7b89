/**
 * Waiting for a destination with a deadline: no call may outlast the relay's timeout, nor the batch
 * (whose signal fires on shutdown or when the partition is lost). Shared by every relay.
 */
import { DeliveryError } from '../../core/errors.js';

/**
 * Settles with `work`, or rejects with `onTimeout()` after `timeout` ms (never, for `Infinity`), or
 * with `onAbort(reason)` when `signal` fires (by default the signal's reason itself). `work` is a
 * promise, or a function called in a later microtask (a throw counts as a rejection) and not at all
 * when `signal` has already fired. `work` itself is not cancelled: it may still finish later.
 * Leaves no timer or listener behind.
 *
 * @example
 * await withDeadline(() => queue.addBulk(jobs), 10_000, signal, () => new Error('addBulk timed out'));
 */
export function withDeadline<T>(
  work: Promise<T> | (() => Promise<T>),
  timeout: number,
  signal: AbortSignal | undefined,
  onTimeout: () => unknown,
  onAbort: (reason: unknown) => unknown = (reason) => reason,
): Promise<T> {
  if (signal?.aborted) return Promise.reject(onAbort(signal.reason));
  return new Promise<T>((resolve, reject) => {
    const finish = (settle: () => void): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', abort);
      settle();
    };
    const abort = (): void => finish(() => reject(onAbort(signal!.reason)));
    const timer = Number.isFinite(timeout)
      ? setTimeout(() => finish(() => reject(onTimeout())), timeout)
      : undefined;
    signal?.addEventListener('abort', abort, { once: true });
    (typeof work === 'function' ? Promise.resolve().then(work) : work).then(
      (value) => finish(() => resolve(value)),
      (error: unknown) => finish(() => reject(error)),
    );
  });
}

/** A wait that took longer than allowed: retryable. */
export class WaitTimeout extends DeliveryError {
  constructor(what: string, ms: number) {
    super(`${what} took longer than ${ms} ms`);
    this.name = 'WaitTimeout';
  }
}

/**
 * Waits for `promise`, but no longer than `ms` milliseconds and not past `signal`: rejects with a
 * {@link WaitTimeout} naming `what` on timeout, with the signal's reason on abort.
 *
 * @example
 * await within(channel.checkExchange('orders'), 5000, undefined, 'checking the RabbitMQ exchange');
 */
export function within<T>(
  promise: Promise<T>,
  ms: number,
  signal: AbortSignal | undefined,
  what: string,
): Promise<T> {
  return withDeadline(promise, ms, signal, () => new WaitTimeout(what, ms));
}
