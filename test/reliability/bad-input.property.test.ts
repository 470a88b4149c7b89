/**
 * Bad input, tried at random (fast-check) on Postgres and SQLite: payloads, group keys (empty,
 * huge, unicode, NUL, lone surrogates, not strings), headers, types and whole publishMany calls.
 *
 * For every input, publish either returns an id and the relay later receives exactly what was
 * published, or it throws an OutboxerError with a code the input explains; either way the caller's
 * transaction is unaffected (another statement runs, and its own row commits). Nothing a message
 * contains ever reaches SQL text: every statement publish sends is one of the fixed statements a
 * plain message produces. Then option objects: any of them builds an instance or throws
 * INVALID_OPTIONS / INVALID_IDENTIFIER, never anything else.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  Outboxer,
  functionRelay,
  hashGroupKey,
  isOutboxerError,
  type Envelope,
  type ErrorCode,
  type PublishInput,
} from 'outboxer';
import {
  postgresAndSqlite as fixtures,
  sqliteFixture,
  type PostgresOrSqliteFixture as Fixture,
} from '../support/databases.js';
import { codeOf, recordingAdapter } from './support.js';

const MAX_PAYLOAD = 2048;
const PARTITIONS = 4;
const RUNS = Number(process.env.PROPERTY_RUNS ?? 120);

interface Input {
  payload: unknown;
  groupKey?: unknown;
  headers?: unknown;
  type?: unknown;
}

/** The codes an input deserves, from the documented rules (docs/errors.md); empty = accepted. */
function expectedCodes(input: Input, postgres: boolean): Set<ErrorCode> {
  const codes = new Set<ErrorCode>();
  const badText = (s: string): boolean => !s.isWellFormed() || (postgres && s.includes('\0'));
  const key = input.groupKey;
  if (key !== null && key !== undefined) {
    if (
      typeof key !== 'string' ||
      key === '' ||
      badText(key) ||
      /[\r\n]/.test(key) ||
      Buffer.byteLength(key) > 512
    )
      codes.add('INVALID_MESSAGE');
  }
  const type = input.type;
  if (type !== null && type !== undefined) {
    if (typeof type !== 'string' || type === '' || type.length > 200 || badText(type) || /[\r\n]/.test(type))
      codes.add('INVALID_MESSAGE');
  }
  let json: string | undefined;
  try {
    json = JSON.stringify(input.payload);
  } catch {
    codes.add('PAYLOAD_NOT_ENCODABLE');
  }
  if (json === undefined || (json !== undefined && losesData(input.payload, '')))
    codes.add('PAYLOAD_NOT_ENCODABLE');
  else if (Buffer.byteLength(json) > MAX_PAYLOAD) codes.add('PAYLOAD_TOO_LARGE');
  const headers = input.headers;
  if (headers !== null && headers !== undefined) {
    const prototype = typeof headers === 'object' ? (Object.getPrototypeOf(headers) as unknown) : undefined;
    if (prototype !== Object.prototype && prototype !== null) codes.add('INVALID_MESSAGE');
    else {
      const entries = Object.entries(headers);
      const badName = (k: string) =>
        k.length === 0 || Buffer.byteLength(k) > 255 || /[\x00-\x20\x7f:]/.test(k) || /^outboxer-/i.test(k);
      if (
        entries.some(
          ([k, v]) => typeof v !== 'string' || badText(k) || badText(v) || badName(k) || /[\r\n\0]/.test(v),
        )
      )
        codes.add('INVALID_MESSAGE');
      else if (entries.length > 0 && Buffer.byteLength(JSON.stringify(headers)) > 16_384)
        codes.add('INVALID_MESSAGE');
    }
  }
  return codes;
}

/**
 * Whether JSON would silently lose part of a value (docs/reliability.md, "Bad input"): a NaN or
 * ±Infinity, or an object other than a plain object or array that encodes to `{}` (a Map, a Set,
 * an empty typed array…). A walk of its own, beside the engine's replacer, to judge it.
 */
function losesData(value: unknown, key: string): boolean {
  let v = value;
  if (typeof v === 'object' && v !== null && typeof (v as { toJSON?: unknown }).toJSON === 'function')
    v = (v as { toJSON(key: string): unknown }).toJSON(key);
  if (v instanceof Number) v = v.valueOf();
  if (typeof v === 'number') return !Number.isFinite(v);
  if (typeof v !== 'object' || v === null || v instanceof String || v instanceof Boolean) return false;
  if (Array.isArray(v)) return v.some((item, i) => losesData(item, String(i)));
  const prototype = Object.getPrototypeOf(v) as unknown;
  if (prototype !== Object.prototype && prototype !== null && Object.keys(v).length === 0) return true;
  return Object.keys(v).some((k) => losesData((v as Record<string, unknown>)[k], k));
}

// ------------------------------------------------------------------------------------------------
// Arbitraries

const nasty = fc.constantFrom(
  "'); DROP TABLE orders; --",
  '$1',
  '$$ $tag$',
  '\\',
  '"',
  '\u0000',
  '\uD800',
  '\uDFFF',
  '🎉',
  '\u202e',
  'NULL',
  '/* */',
  '\r\n',
);
const text = (maxLength: number) =>
  fc.oneof(
    fc.string({ unit: 'binary', maxLength }),
    fc.string({ unit: 'grapheme', maxLength }),
    fc.array(fc.oneof(nasty, fc.string({ maxLength: 5 })), { maxLength: 6 }).map((parts) => parts.join('')),
  );

const payloadArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue(),
  fc.anything({
    withBigInt: true,
    withBoxedValues: true,
    withDate: true,
    withMap: true,
    withSet: true,
    withNullPrototype: true,
    withObjectString: true,
    withSparseArray: true,
    withTypedArray: true,
    withUnicodeString: true,
  }),
  fc.dictionary(text(20), text(100)),
  text(3000).map((s) => ({ big: s })),
  fc.constantFrom(undefined, () => 1, Symbol('s'), 10n, -0, NaN, Infinity),
);

const groupKeyArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(null, undefined, '', 'k'.repeat(512), 'k'.repeat(513), 'é'.repeat(256), 'é'.repeat(257)),
  text(60),
  fc.string({ unit: 'grapheme', minLength: 100, maxLength: 300 }),
  fc.string({ minLength: 500, maxLength: 530 }),
  fc.oneof(fc.integer(), fc.boolean(), fc.object(), fc.array(fc.string()), fc.constant(Symbol('k'))),
);

const headersArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(undefined, null, {}),
  fc.dictionary(text(15), text(40), { maxKeys: 5 }),
  fc.dictionary(
    fc.string({ maxLength: 10 }),
    fc.oneof(fc.string(), fc.integer(), fc.constant(null), fc.object()),
    {
      maxKeys: 4,
    },
  ),
  fc.string({ minLength: 16_000, maxLength: 17_000 }).map((value) => ({ big: value })),
  fc.oneof(fc.string(), fc.integer(), fc.array(fc.string())),
);

const typeArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(undefined, null, '', 't'.repeat(200), 't'.repeat(201)),
  text(30),
  fc.oneof(fc.integer(), fc.object()),
);

// ------------------------------------------------------------------------------------------------

describe.each(fixtures)('publish, tried at random on $name', ({ name, make }) => {
  const postgres = name === 'postgres';
  let fixture: Fixture;
  let outboxer: Outboxer<never, boolean>;
  let recorder: ReturnType<typeof recordingAdapter>;
  const received = new Map<number, Envelope>();
  let reference: Set<string>;
  let business = 0;

  beforeAll(async () => {
    fixture = await make();
    recorder = recordingAdapter(fixture.database);
    outboxer = new Outboxer({
      database: recorder.adapter,
      testing: 'manual',
      outboxes: {
        orders: {
          relay: functionRelay(async (m) => void received.set(m.id, m)),
          maxPayloadBytes: MAX_PAYLOAD,
          partitions: PARTITIONS,
        },
      },
    }) as Outboxer<never, boolean>;
    await outboxer.migrate();
    await fixture.query('CREATE TABLE business (id INTEGER PRIMARY KEY)');
    // The statements ordinary messages produce, one at a time and several at once (up to the
    // property's six): one text for any count on Postgres, one per count on SQLite (its VALUES).
    recorder.recording.on = true;
    await attempt({ payload: { ok: 1 }, groupKey: 'g', headers: { h: 'v' }, type: 't' });
    for (let count = 2; count <= 6; count += 1) {
      recorder.recording.on = true;
      await attemptMany(
        Array.from({ length: count }, (_, i) => ({
          outbox: 'orders',
          payload: i,
          groupKey: i % 2 ? 'g' : null,
        })),
      );
    }
    recorder.recording.on = false;
    reference = new Set(recorder.texts);
    recorder.texts.length = 0;
    expect(reference.size).toBe(postgres ? 2 : 6);
    await outboxer.drain('orders');
    received.clear();
  }, 120_000);
  afterAll(() => fixture.close());

  /** Runs `publish` inside a transaction that also writes a business row; returns what happened. */
  async function inTransaction(
    publish: (tx: never) => unknown,
  ): Promise<{ value?: unknown; error?: unknown }> {
    const id = ++business;
    const outcome: { value?: unknown; error?: unknown } = {};
    const f = fixture;
    const record = recorder.recording.on;
    const call = (tx: never): unknown => {
      recorder.recording.on = record;
      try {
        return publish(tx);
      } finally {
        recorder.recording.on = false;
      }
    };
    if (f.kind === 'sqlite') {
      f.db.transaction(() => {
        f.db.prepare('INSERT INTO business (id) VALUES (?)').run(id);
        try {
          outcome.value = call(f.db as never);
        } catch (error) {
          outcome.error = error;
        }
        // The transaction still works.
        f.db.prepare('SELECT 1').get();
      })();
    } else {
      await f.transaction(async (tx) => {
        await tx.query('INSERT INTO business (id) VALUES ($1)', [id]);
        try {
          outcome.value = await (call(tx as never) as Promise<unknown>);
        } catch (error) {
          outcome.error = error;
        }
        await tx.query('SELECT 1');
      });
    }
    const rows = await fixture.query(`SELECT id FROM business WHERE id = ${id}`);
    expect(rows, 'the business row of the transaction committed').toHaveLength(1);
    return outcome;
  }

  async function attempt(input: Input): Promise<{ value?: unknown; error?: unknown }> {
    return inTransaction((tx) =>
      outboxer.publish(tx, 'orders', input.payload, {
        groupKey: input.groupKey as string,
        headers: input.headers as Record<string, string>,
        type: input.type as string,
      }),
    );
  }

  async function attemptMany(inputs: unknown[]): Promise<{ value?: unknown; error?: unknown }> {
    return inTransaction((tx) => outboxer.publishMany(tx, inputs as PublishInput[]));
  }

  /** Accepted messages, checked against what the relay received when the property is done. */
  const accepted = new Map<number, Input>();

  /** Delivers everything and checks that the relay received exactly what was published. */
  async function expectDelivered(): Promise<void> {
    await outboxer.drain('orders');
    for (const [id, input] of accepted) expectReceived(id, input);
    accepted.clear();
  }

  function expectReceived(id: number, input: Input): void {
    const envelope = received.get(id);
    expect(envelope, `message ${id} reached the relay`).toBeDefined();
    expect(envelope!.payload).toEqual(JSON.parse(JSON.stringify(input.payload)) as unknown);
    expect(envelope!.groupKey).toBe(input.groupKey ?? null);
    expect(envelope!.type).toBe(input.type ?? null);
    const headers = input.headers as Record<string, string> | null | undefined;
    expect(envelope!.headers).toEqual(
      headers && Object.keys(headers).length > 0 ? (JSON.parse(JSON.stringify(headers)) as unknown) : {},
    );
    if (typeof input.groupKey === 'string')
      expect(envelope!.partition).toBe(hashGroupKey(input.groupKey) % PARTITIONS);
    received.delete(id);
  }

  async function check(input: Input): Promise<void> {
    const before = (await outboxer.counts('orders')).pending;
    recorder.recording.on = true;
    const outcome = await attempt(input);
    const expected = expectedCodes(input, postgres);
    for (const sql of recorder.texts.splice(0))
      expect(reference.has(sql), `unexpected SQL: ${sql}`).toBe(true);
    if (outcome.error === undefined) {
      expect([...expected], 'accepted although invalid').toEqual([]);
      accepted.set(outcome.value as number, input);
    } else {
      expect(isOutboxerError(outcome.error), codeOf(outcome.error)).toBe(true);
      expect([...expected], `refused with ${codeOf(outcome.error)}`).toContain(codeOf(outcome.error));
      expect((await outboxer.counts('orders')).pending, 'nothing written').toBe(before);
    }
  }

  test('payloads', async () => {
    await fc.assert(
      fc.asyncProperty(payloadArb, (payload) => check({ payload })),
      { numRuns: RUNS },
    );
    await expectDelivered();
  }, 180_000);

  test('group keys', async () => {
    await fc.assert(
      fc.asyncProperty(groupKeyArb, (groupKey) => check({ payload: { k: 1 }, groupKey })),
      { numRuns: RUNS },
    );
    await expectDelivered();
  }, 180_000);

  test('headers and types', async () => {
    await fc.assert(
      fc.asyncProperty(headersArb, typeArb, (headers, type) => check({ payload: { h: 1 }, headers, type })),
      { numRuns: RUNS },
    );
    await expectDelivered();
  }, 180_000);

  test('whole messages, one bad field or several', async () => {
    await fc.assert(
      fc.asyncProperty(payloadArb, groupKeyArb, headersArb, typeArb, (payload, groupKey, headers, type) =>
        check({ payload, groupKey, headers, type }),
      ),
      { numRuns: RUNS },
    );
    await expectDelivered();
  }, 180_000);

  test('publishMany: one bad message refuses the call and writes none of them', async () => {
    const item = fc.oneof(
      fc.record({ payload: payloadArb, groupKey: groupKeyArb, headers: headersArb, type: typeArb }),
      fc.record({ payload: fc.jsonValue() }),
    );
    const odd = fc.constantFrom<unknown>(null, 42, 'orders', { outbox: 'nope', payload: 1 }, { payload: 1 });
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.oneof({ weight: 9, arbitrary: item.map((i) => ({ outbox: 'orders', ...i }) as unknown) }, odd),
          {
            minLength: 1,
            maxLength: 6,
          },
        ),
        async (inputs) => {
          const before = (await outboxer.counts('orders')).pending;
          recorder.recording.on = true;
          const outcome = await attemptMany(inputs);
          for (const sql of recorder.texts.splice(0))
            expect(reference.has(sql), `unexpected SQL: ${sql}`).toBe(true);
          const expected = new Set<string>();
          for (const input of inputs) {
            if (typeof input !== 'object' || input === null) expected.add('INVALID_OPTIONS');
            else if ((input as { outbox?: unknown }).outbox !== 'orders') expected.add('UNKNOWN_OUTBOX');
            else for (const code of expectedCodes(input as Input, postgres)) expected.add(code);
          }
          if (outcome.error === undefined) {
            expect([...expected]).toEqual([]);
            const ids = outcome.value as number[];
            expect(ids).toHaveLength(inputs.length);
            expect([...ids].sort((a, b) => a - b)).toEqual(ids); // ids follow the order given
            for (const [i, id] of ids.entries()) accepted.set(id, inputs[i] as Input);
          } else {
            expect(isOutboxerError(outcome.error), codeOf(outcome.error)).toBe(true);
            expect([...expected]).toContain(codeOf(outcome.error));
            expect((await outboxer.counts('orders')).pending).toBe(before);
          }
        },
      ),
      { numRuns: Math.ceil(RUNS / 2) },
    );
    await expectDelivered();
  }, 180_000);
});

describe('options, tried at random', () => {
  const { database } = sqliteFixture();
  const relay = functionRelay(async () => undefined);
  const value = fc.oneof(
    fc.anything({ maxDepth: 2 }),
    fc.integer({ min: -5, max: 100_000 }),
    fc.double(),
    fc.constantFrom(
      Infinity,
      -Infinity,
      NaN,
      0,
      1,
      1.5,
      2 ** 31,
      'group',
      'total',
      'none',
      'delete',
      'force',
      true,
    ),
    fc.record({ min: fc.anything(), max: fc.anything() }, { requiredKeys: [] }),
    fc.record({ keep: fc.anything() }, { requiredKeys: [] }),
  );
  const outboxKeys = [
    'ordering',
    'partitions',
    'batchSize',
    'pollInterval',
    'deliveryTimeout',
    'maxAttempts',
    'backoff',
    'retention',
    'pruneInterval',
    'table',
    'notify',
    'serializeWrites',
    'maxPayloadBytes',
    'reconfigure',
    'colour',
  ];
  const instanceKeys = [
    'relay',
    'testing',
    'name',
    'schema',
    'leaseTimeout',
    'shutdownTimeout',
    'maxErrorLength',
    'verbose',
  ];
  const pick = (keys: string[]) =>
    fc
      .dictionary(fc.constantFrom(...keys), value, { maxKeys: 4 })
      .map((o) => ({ ...o }) as Record<string, unknown>);

  test('every option object builds an instance or is refused with INVALID_OPTIONS or INVALID_IDENTIFIER', () => {
    fc.assert(
      fc.property(
        pick(instanceKeys),
        pick(outboxKeys),
        fc.oneof(fc.constant('orders'), fc.string()),
        (instance, outbox, name) => {
          try {
            new Outboxer({ database, ...instance, outboxes: { [name]: { relay, ...outbox } } } as never);
          } catch (error) {
            expect(['INVALID_OPTIONS', 'INVALID_IDENTIFIER']).toContain(codeOf(error));
          }
        },
      ),
      { numRuns: RUNS * 4 },
    );
  });
});
