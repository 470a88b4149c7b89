/**
 * The default logger: without a `logger` option, warnings and errors reach the console (rate-limited
 * when they repeat); `logger: false` silences outboxer; a given logger gets every call and the
 * console nothing.
 */
import diagnostics from 'node:diagnostics_channel';
import { afterAll, afterEach, beforeEach, describe, expect, test, vi, type MockInstance } from 'vitest';
import { Outboxer, functionRelay, type Logger } from 'outboxer';
import { consoleLogger } from '../../src/core/logger.js';
import { publishInTransaction, sqliteFixture } from '../support/databases.js';
import { waitUntil } from '../support/random.js';

type Spy = MockInstance<(...args: unknown[]) => void>;
let warn: Spy;
let error: Spy;

beforeEach(() => {
  warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
  error = vi.spyOn(console, 'error').mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** The console lines whose message starts with `prefix`. */
function lines(spy: Spy, prefix: string): unknown[][] {
  return spy.mock.calls.filter((call) => String(call[0]).startsWith(prefix));
}

function recordingLogger(): Logger & { calls: Array<[string, string, unknown]> } {
  const calls: Array<[string, string, unknown]> = [];
  const record = (level: string) => (message: string, context?: Record<string, unknown>) =>
    void calls.push([level, message, context]);
  return {
    calls,
    debug: record('debug'),
    info: record('info'),
    warn: record('warn'),
    error: record('error'),
  };
}

describe('consoleLogger', () => {
  function make() {
    let clock = 1_000_000;
    const sink = { warn: vi.fn(), error: vi.fn() };
    const logger = consoleLogger({ interval: 60_000, now: () => clock, console: sink });
    return {
      logger,
      sink,
      advance: (ms: number) => {
        clock += ms;
      },
    };
  }

  test('warn and error go to console.warn and console.error with their context; debug and info are dropped', () => {
    const { logger, sink } = make();
    logger.debug('outboxer: debug', { outbox: 'a' });
    logger.info('outboxer: info', { outbox: 'a' });
    logger.warn('outboxer: careful', { outbox: 'a' });
    logger.error('outboxer: broken', { outbox: 'a', partition: 0 });
    logger.warn('no prefix');
    expect(sink.warn.mock.calls).toEqual([['outboxer: careful', { outbox: 'a' }], ['outboxer: no prefix']]);
    expect(sink.error.mock.calls).toEqual([['outboxer: broken', { outbox: 'a', partition: 0 }]]);
  });

  test('the same message prints once per interval per outbox and partition, then says how many were left out', () => {
    const { logger, sink, advance } = make();
    for (let i = 0; i < 10; i += 1) {
      logger.error('outboxer: relay round failed; retrying', { outbox: 'a', partition: 0, error: `e${i}` });
      logger.error('outboxer: relay round failed; retrying', { outbox: 'a', partition: 1 });
      logger.error('outboxer: relay round failed; retrying', { outbox: 'b', partition: 0 });
      logger.warn('outboxer: relay round failed; retrying', { outbox: 'a', partition: 0 });
      advance(1000);
    }
    // One line for each (level, outbox, partition): four, the first of each.
    expect(sink.error).toHaveBeenCalledTimes(3);
    expect(sink.warn).toHaveBeenCalledTimes(1);
    expect(sink.error.mock.calls[0]).toEqual([
      'outboxer: relay round failed; retrying',
      { outbox: 'a', partition: 0, error: 'e0' },
    ]);

    advance(50_000); // 60 s after the first line.
    logger.error('outboxer: relay round failed; retrying', { outbox: 'a', partition: 0, error: 'e10' });
    expect(sink.error).toHaveBeenCalledTimes(4);
    expect(sink.error.mock.calls[3]).toEqual([
      'outboxer: relay round failed; retrying (9 more like this since the last one printed)',
      { outbox: 'a', partition: 0, error: 'e10' },
    ]);
    // Quiet again for a minute, then printed without a count: nothing was left out meanwhile.
    logger.error('outboxer: relay round failed; retrying', { outbox: 'a', partition: 0 });
    advance(60_000);
    logger.error('outboxer: relay round failed; retrying', { outbox: 'a', partition: 0 });
    expect(sink.error.mock.calls.slice(4).map((call) => call[0])).toEqual([
      'outboxer: relay round failed; retrying (1 more like this since the last one printed)',
    ]);
  });

  test('messages differing only in their numbers count as the same message', () => {
    const { logger, sink } = make();
    logger.warn('outboxer: 3 pending messages sit in partitions >= 4, which no worker reads', {
      outbox: 'a',
    });
    logger.warn('outboxer: 7 pending messages sit in partitions >= 4, which no worker reads', {
      outbox: 'a',
    });
    logger.warn('outboxer: something else', { outbox: 'a' });
    expect(sink.warn.mock.calls.map((call) => call[0])).toEqual([
      'outboxer: 3 pending messages sit in partitions >= 4, which no worker reads',
      'outboxer: something else',
    ]);
  });

  test('a message still in its quiet spell is never forgotten, however many others arrive', () => {
    const { logger, sink, advance } = make();
    for (let round = 0; round < 2; round += 1)
      for (let i = 0; i < 1000; i += 1) logger.warn('outboxer: failed', { outbox: `o${i}` });
    expect(sink.warn).toHaveBeenCalledTimes(1000);
    advance(60_000);
    logger.warn('outboxer: failed', { outbox: 'o0' });
    expect(sink.warn).toHaveBeenCalledTimes(1001);
  });
});

describe('the logger option on SQLite', () => {
  const fixture = sqliteFixture();
  afterAll(() => fixture.close());
  let tables = 0;

  /** An instance whose relay always fails, messages going dead at the first failure. */
  async function failingInstance(logger?: Logger | false) {
    tables += 1;
    const relay = functionRelay(async () => {
      throw new Error('destination down');
    });
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { orders: { relay, table: `dead_${tables}`, maxAttempts: 1 } },
      testing: 'manual',
      ...(logger === undefined ? {} : { logger }),
    });
    await outboxer.migrate();
    const ids = await publishInTransaction(
      fixture,
      outboxer,
      Array.from({ length: 5 }, (_, i) => ({ outbox: 'orders', payload: i, groupKey: `g${i}` })),
    );
    const result = await outboxer.drain('orders');
    expect(result.dead).toHaveLength(5);
    return ids;
  }

  test('without a logger, a dead message prints a warning on the console, once for a batch of them', async () => {
    const ids = await failingInstance();
    const dead = lines(warn, 'outboxer: message is dead');
    expect(dead).toHaveLength(1);
    expect(dead[0]![1]).toMatchObject({ outbox: 'orders', id: ids[0], error: 'Error: destination down' });
    expect(error).not.toHaveBeenCalled();
  });

  test('logger: false prints nothing', async () => {
    await failingInstance(false);
    expect(warn).not.toHaveBeenCalled();
    expect(error).not.toHaveBeenCalled();
  });

  test('a given logger gets every call and the console nothing', async () => {
    const logger = recordingLogger();
    const ids = await failingInstance(logger);
    expect(logger.calls.filter(([, message]) => message === 'outboxer: message is dead')).toEqual(
      ids.map((id) => ['warn', 'outboxer: message is dead', expect.objectContaining({ id })]),
    );
    expect(warn).not.toHaveBeenCalled();
    expect(error).not.toHaveBeenCalled();
  });

  test('a delivery that fails and will be retried logs one line a round, with its first message', async () => {
    tables += 1;
    const logger = recordingLogger();
    const relay = functionRelay(async () => {
      throw new Error('destination down');
    });
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { orders: { relay, table: `retry_${tables}`, maxAttempts: 3 } },
      testing: 'manual',
      logger,
    });
    await outboxer.migrate();
    const ids = await publishInTransaction(
      fixture,
      outboxer,
      Array.from({ length: 4 }, (_, i) => ({ outbox: 'orders', payload: i, groupKey: `g${i}` })),
    );
    const result = await outboxer.drain('orders', { maxRounds: 3 });
    const retries = logger.calls.filter(([, message]) => message === 'outboxer: delivery failed; will retry');
    // Each round fails every group's head: one line for the round, not one per message.
    expect(retries.length).toBeGreaterThan(0);
    expect(retries.length).toBe(new Set(result.retried.map((r) => r.envelope.attempts)).size);
    expect(retries[0]).toEqual([
      'warn',
      'outboxer: delivery failed; will retry',
      expect.objectContaining({ outbox: 'orders', messages: 4, firstId: ids[0], attempts: 1 }),
    ]);
  });

  test('in manual testing mode, counts() does not warn that no relaying node runs', async () => {
    const logger = recordingLogger();
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { orders: { relay: functionRelay(async () => undefined), table: `manual_${++tables}` } },
      testing: 'manual',
      logger,
      leaseTimeout: 100,
    });
    await outboxer.migrate();
    await publishInTransaction(fixture, outboxer, [{ outbox: 'orders', payload: 1 }]);
    expect((await outboxer.counts('orders')).pending).toBe(1);
    expect(logger.calls.filter(([, message]) => message.includes('no relaying node'))).toEqual([]);
  });

  test.each([
    ['null', null, /Option "logger" must be .*debug, info, warn and error.*or false/],
    ['true', true, /Option "logger" must be .*or false to log nothing; got true/],
    ['without debug and info', { warn() {}, error() {} }, /Option "logger" must be/],
  ])('logger: %s is refused at construction', (_, logger, message) => {
    expect(
      () =>
        new Outboxer({
          database: fixture.database,
          outboxes: { orders: { relay: functionRelay(async () => undefined) } },
          testing: 'manual',
          logger: logger as never,
        }),
    ).toThrow(expect.objectContaining({ code: 'INVALID_OPTIONS', message: expect.stringMatching(message) }));
  });

  /**
   * A running relay whose rounds fail at every poll (its table is gone): the default logger prints
   * one line while the failures repeat; a given logger gets one call a failure.
   */
  async function failingRounds(logger?: Logger) {
    tables += 1;
    const table = `gone_${tables}`;
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { orders: { relay: functionRelay(async () => undefined), table, pollInterval: 5 } },
      ...(logger === undefined ? {} : { logger }),
    });
    await outboxer.migrate();
    let failures = 0; // Failed rounds: the errors reported with a partition.
    const onError = (event: unknown) => {
      if ((event as { partition?: number }).partition !== undefined) failures += 1;
    };
    diagnostics.subscribe('outboxer:error', onError);
    await outboxer.start();
    try {
      await fixture.query(`DROP TABLE "${table}"`);
      await waitUntil(() => failures >= 4, 10_000, 'four failed rounds');
    } finally {
      await outboxer.stop();
      diagnostics.unsubscribe('outboxer:error', onError);
    }
    return failures;
  }

  test('without a logger, a relay failing at every poll prints one error, not one a poll', async () => {
    await failingRounds();
    const failed = lines(error, 'outboxer: relay round failed; retrying');
    expect(failed).toHaveLength(1);
    expect(failed[0]![1]).toMatchObject({ outbox: 'orders', partition: 0 });
    expect(String((failed[0]![1] as { error: string }).error)).toMatch(/gone_\d+ does not exist/);
  });

  test('a given logger gets every failed round', async () => {
    const logger = recordingLogger();
    const failures = await failingRounds(logger);
    const failed = logger.calls.filter(([, message]) => message === 'outboxer: relay round failed; retrying');
    expect(failed).toHaveLength(failures);
    expect(failures).toBeGreaterThanOrEqual(4);
    expect(error).not.toHaveBeenCalled();
    expect(warn).not.toHaveBeenCalled();
  });
});
