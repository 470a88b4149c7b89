/**
 * Bad input, tried at random (fast-check) on Postgres and SQLite: payloads, group keys (empty,
 * huge, unicode, NUL, lone surrogates, not strings), headers, types and whole publishMany calls.
 *
 * For every input, publish either returns an id and the relay later receives exactly what was
 * published, or it throws an OutboxerError with a code the input explains; either way the caller's
 * transaction is unaffected (another statement runs, and its own row commits). Nothing a message
 * contains ever reaches SQL text: every statement publish sends is one of the fixed statements a
 * plain message produces. Option objects are tried in bad-options.property.test.ts.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  Outboxer,
  functionRelay,
  hashGroupKey,
  isOutboxerError,
  type Envelope,
  type PublishInput,
} from 'outboxer';
import {
  postgresAndSqlite as fixtures,
  type PostgresOrSqliteFixture as Fixture,
} from '../support/databases.js';
import { codeOf, recordingAdapter } from './support.js';
import {
  MAX_PAYLOAD,
  PARTITIONS,
  RUNS,
  expectedCodes,
  payloadArb,
  groupKeyArb,
  headersArb,
  typeArb,
  type Input,
} from './bad-input.support.js';

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
