/**
 * What a destination's errors turn into, tried at random (fast-check) on Postgres and SQLite:
 * `lastError` is cut to `maxErrorLength`, stays valid text, and never keeps the password of a
 * connection string; the relay loop survives whatever a relay throws. And a password in the
 * database's own connection string never shows up in an error or a log line.
 */
import { EventEmitter } from 'node:events';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DeliveryError, Outboxer, PermanentError, functionRelay, type Logger } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { FaultProxy } from '../../chaos/fault-proxy.js';
import {
  DATABASE_URL,
  postgresAndSqlite as fixtures,
  postgresFixture,
  type PostgresOrSqliteFixture as Fixture,
} from '../support/databases.js';
import { sleep, waitUntil } from '../support/random.js';

const RUNS = Number(process.env.PROPERTY_RUNS ?? 120);
const MAX_ERROR = 100; // the smallest maxErrorLength allowed

const text = (maxLength: number) =>
  fc.oneof(
    fc.string({ unit: 'binary', maxLength }),
    fc.string({ unit: 'grapheme', maxLength }),
    fc.constantFrom('\u0000', '\uD83D', '🎉'.repeat(60), 'é'.repeat(3000), 'x'.repeat(10_000)),
  );
const password = fc.stringMatching(/^[A-Za-z0-9._~-]{10,24}$/);

/** A value a relay may throw, with the password it hides (if any). */
const thrown: fc.Arbitrary<{ value: unknown; secret: string | null }> = fc.oneof(
  fc.tuple(text(5000), text(60)).map(([message, name]) => {
    const error = new Error(message);
    error.name = name;
    return { value: error, secret: null };
  }),
  fc.tuple(text(3000), password, text(200)).map(([before, secret, after]) => ({
    value: new Error(`${before} postgres://app:${secret}@db.internal:5432/app ${after}`),
    secret,
  })),
  fc.tuple(password, fc.constantFrom('amqps', 'redis', 'https', 'mongodb+srv')).map(([secret, scheme]) => ({
    value: `connect failed: ${scheme}://user:${secret}@broker:1234/vhost`,
    secret,
  })),
  text(5000).map((message) => ({ value: message, secret: null })),
  fc.jsonValue().map((value) => ({ value, secret: null })),
  fc.constantFrom(undefined, null, Symbol('s'), 42).map((value) => ({ value, secret: null })),
  fc
    .tuple(text(500), fc.oneof(fc.double(), fc.integer(), fc.string(), fc.constant(undefined)), fc.boolean())
    .map(([message, retryAfter, permanent]) => ({
      value: permanent
        ? new PermanentError(message, { retryAfter: retryAfter as number })
        : new DeliveryError(message, { retryAfter: retryAfter as number }),
      secret: null,
    })),
);

function wellFormed(value: unknown): unknown {
  if (typeof value === 'string') return value.toWellFormed();
  if (value instanceof Error) {
    value.message = value.message.toWellFormed();
    value.name = value.name.toWellFormed();
  }
  return value;
}

describe.each(fixtures)('lastError on $name', ({ make }) => {
  let fixture: Fixture;
  let outboxer: Outboxer<never, boolean>;
  let next: unknown;

  beforeAll(async () => {
    fixture = await make();
    outboxer = new Outboxer({
      database: fixture.database,
      testing: 'manual',
      maxErrorLength: MAX_ERROR,
      outboxes: {
        orders: {
          relay: functionRelay(async () => {
            throw next;
          }),
        },
      },
    }) as Outboxer<never, boolean>;
    await outboxer.migrate();
  });
  afterAll(() => fixture.close());

  async function publishOne(): Promise<void> {
    const f = fixture;
    if (f.kind === 'sqlite') f.db.transaction(() => outboxer.publish(f.db as never, 'orders', { n: 1 }))();
    else await f.transaction((tx) => outboxer.publish(tx as never, 'orders', { n: 1 }) as Promise<number>);
  }

  test('is cut to maxErrorLength, valid text, without passwords, whatever the relay throws', async () => {
    await fc.assert(
      fc.asyncProperty(thrown, async ({ value, secret }) => {
        // Start clean: a failed run (or fast-check's shrinking) may have left a message behind.
        const left = await outboxer.listPending('orders', { limit: 1000 });
        if (left.length > 0)
          await outboxer.discard(
            'orders',
            left.map((m) => m.id),
          );
        await publishOne();
        // SQLite keeps a lone surrogate as three bytes of invalid UTF-8 (finding 8, tested there).
        next = fixture.kind === 'sqlite' ? wellFormed(value) : value;
        const result = await outboxer.drain('orders', { maxRounds: 1 });
        expect(result.retried).toHaveLength(1);
        const [message] = await outboxer.listPending('orders');
        const lastError = message!.lastError!;
        expect(lastError.length).toBeLessThanOrEqual(MAX_ERROR);
        expect(lastError.isWellFormed()).toBe(true);
        expect(lastError).not.toContain('\u0000');
        if (secret !== null) expect(lastError).not.toContain(secret);
        await outboxer.discard('orders', [message!.id]);
      }),
      { numRuns: RUNS },
    );
  }, 180_000);
});

// ------------------------------------------------------------------------------------------------
// Passwords in connection strings

function withPassword(url: string, secret: string): string {
  const u = new URL(url);
  u.password = secret;
  return u.toString();
}

function capturingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const write =
    (level: string) =>
    (message: string, context?: unknown): void => {
      lines.push(
        `${level} ${message} ${JSON.stringify(context, (_k, v: unknown) => (v instanceof Error ? `${v.name}: ${v.message} ${v.stack}` : v))}`,
      );
    };
  return {
    logger: { debug: write('debug'), info: write('info'), warn: write('warn'), error: write('error') },
    lines,
  };
}

/** Everything an error carries that could end up in a log: message, stack, own fields, causes. */
function everything(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current !== undefined && current !== null && depth < 5; depth += 1) {
    if (current instanceof Error) {
      parts.push(String(current), current.stack ?? '');
      for (const key of Object.getOwnPropertyNames(current)) {
        try {
          parts.push(`${key}=${String((current as unknown as Record<string, unknown>)[key])}`);
        } catch {
          // a getter that throws
        }
      }
      current = current.cause;
    } else {
      parts.push(String(current));
      break;
    }
  }
  return parts.join('\n');
}

describe('a password in the connection string', () => {
  const secret = `pw-${Math.random().toString(36).slice(2)}-secret`;

  test('never appears in the error of an unreachable database, nor in the logs', async () => {
    const pool = new pg.Pool({
      connectionString: withPassword('postgres://app@127.0.0.1:1/app', secret),
      connectionTimeoutMillis: 2000,
    });
    pool.on('error', () => undefined);
    const { logger, lines } = capturingLogger();
    const outboxer = new Outboxer({
      database: nodePostgres(pool),
      logger,
      outboxes: { orders: { relay: functionRelay(async () => undefined) } },
    });
    const errors: unknown[] = [];
    await outboxer.migrate().catch((error: unknown) => errors.push(error));
    await outboxer.start().catch((error: unknown) => errors.push(error));
    await outboxer.counts('orders').catch((error: unknown) => errors.push(error));
    await pool.end();
    expect(errors).toHaveLength(3);
    for (const error of errors) expect(everything(error)).not.toContain(secret);
    expect(lines.join('\n')).not.toContain(secret);
  });

  test('never appears in logs or lastError while relaying through cut connections', async () => {
    const fixture = await postgresFixture();
    const proxy = new FaultProxy(Number(new URL(DATABASE_URL).port || 5432));
    await proxy.listen();
    const url = new URL(withPassword(DATABASE_URL, secret));
    url.host = `127.0.0.1:${proxy.port}`;
    const pool = new pg.Pool({
      connectionString: url.toString(),
      options: `-c search_path=${fixture.schema}`,
      connectionTimeoutMillis: 2000,
      max: 6,
    });
    pool.on('error', () => undefined);
    // Works around the checked-out-client crash (see engine-findings.test.ts).
    pool.on('connect', (client) => client.on('error', () => undefined));
    const { logger, lines } = capturingLogger();
    let failing = true;
    const outboxer = new Outboxer({
      database: nodePostgres(pool),
      logger,
      leaseTimeout: 1000,
      outboxes: {
        orders: {
          notify: true,
          pollInterval: 50,
          backoff: { min: 10, max: 50 },
          relay: functionRelay(async () => {
            // Libraries put the URL they failed to reach in their messages.
            if (failing) throw new Error(`could not reach ${url.toString()}`);
          }),
        },
      },
    });
    try {
      await outboxer.migrate();
      await outboxer.start();
      const client = await fixture.pool.connect();
      await client.query('BEGIN');
      await outboxer.publish(client, 'orders', { n: 1 });
      await client.query('COMMIT');
      client.release();
      await waitUntil(
        async () => (await outboxer.listPending('orders'))[0]?.lastError != null,
        20_000,
        'a failed attempt',
      );
      const [message] = await outboxer.listPending('orders');
      expect(message!.lastError).toContain('could not reach');
      expect(message!.lastError).not.toContain(secret);
      proxy.set('down'); // every connection, the listener's too, is cut
      await sleep(1500);
      proxy.set('up');
      failing = false;
      await waitUntil(
        async () => (await outboxer.counts('orders').catch(() => ({ pending: 1 }))).pending === 0,
        30_000,
        'delivery',
      );
    } finally {
      await outboxer.stop();
      await pool.end();
      await proxy.close();
      await fixture.close();
    }
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.join('\n')).not.toContain(secret);
  }, 90_000);

  // BUG (engine): redactCredentials() only knows `scheme://user:password@host` with a password free
  // of '@'. Other common spellings of a connection string keep the password in lastError and logs.
  test.each([
    ['a raw "@" in the password', (pw: string) => `postgres://app:p@${pw}@db:5432/app`],
    ['libpq key=value', (pw: string) => `host=db user=app password=${pw} dbname=app`],
    ['a password query parameter', (pw: string) => `postgres://db:5432/app?user=app&password=${pw}`],
    ['a JDBC-style URL', (pw: string) => `jdbc:postgresql://db/app?password=${pw}`],
  ])('is redacted from lastError when written as %s', async (_name, connectionString) => {
    const fixture = await postgresFixture();
    try {
      const outboxer = new Outboxer({
        database: fixture.database,
        testing: 'manual',
        outboxes: {
          orders: {
            relay: functionRelay(async () => {
              throw new Error(`cannot connect with ${connectionString(secret)}`);
            }),
          },
        },
      });
      await outboxer.migrate();
      await fixture.transaction((tx) => outboxer.publish(tx as never, 'orders', {}) as Promise<number>);
      await outboxer.drain('orders', { maxRounds: 1 });
      const [message] = await outboxer.listPending('orders');
      expect(message!.lastError).toContain('cannot connect');
      expect(message!.lastError).not.toContain(secret);
    } finally {
      await fixture.close();
    }
  });

  // BUG (engine, minor): the listener's "disconnected" warning logs String(error) as it is, not
  // through describeError(): neither redacted nor cut. Every other log line is.
  test('is redacted from the listener-disconnected warning', async () => {
    const fixture = await postgresFixture();
    const fake = new EventEmitter() as EventEmitter & Record<string, unknown>;
    fake.connect = async () => undefined;
    fake.query = async () => undefined;
    fake.end = async () => undefined;
    const { logger, lines } = capturingLogger();
    const outboxer = new Outboxer({
      database: nodePostgres(fixture.pool, { listenClient: () => fake as never }),
      logger,
      outboxes: { orders: { notify: true, relay: functionRelay(async () => undefined) } },
    });
    try {
      await outboxer.migrate();
      await outboxer.start();
      fake.emit('error', new Error(`connection to postgres://app:${secret}@db/app lost`));
      await sleep(50);
      expect(lines.some((l) => l.includes('listener disconnected'))).toBe(true);
      expect(lines.join('\n')).not.toContain(secret);
    } finally {
      await outboxer.stop();
      await fixture.close();
    }
  });
});
