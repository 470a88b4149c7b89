/**
 * Every data-layer adapter publishing hostile values: group keys, types, header names and values,
 * payload strings and keys full of SQL syntax (quotes, `$1`, `?`, `\?`, `$$`, comments…). For each
 * publish, the engine hands the adapter exactly one statement, the same insert a plain message
 * gets, and the database receives exactly that one statement (the library's own transaction
 * control aside) with the message in its bound values; every message reads back exactly as it was
 * published; the canary survives. Postgres libraries are watched on the wire (the logging proxy),
 * SQLite ones at better-sqlite3.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, type PublishInput } from 'outboxer';
import { recordingAdapter } from '../reliability/support.js';
import { HARNESSES, type Opened, type Target } from './adapters.js';
import {
  CANARY,
  HOSTILE_VALUES,
  isTransactionControl,
  normalize,
  postgresScratch,
  skeleton,
  sqliteScratch,
  type LoggedStatement,
} from './support.js';

interface Message {
  readonly payload: unknown;
  readonly groupKey: string;
  readonly type: string;
  readonly headers: Record<string, string>;
}

/** A message carrying `value` everywhere a message carries text. */
function hostileMessage(value: string): Message {
  return {
    payload: { text: value, list: [value, { [value]: value }], [value]: [value, null, 1] },
    groupKey: value,
    type: value,
    // Header names may not hold whitespace, control characters or ':' (no relay could send them).
    headers: { [`x-${value.replace(/[\s:]/g, '_')}`]: value, 'x-sql': value },
  };
}

const PLAIN: Message = { payload: { n: 1 }, groupKey: 'g', type: 't', headers: { 'x-plain': 'p' } };

describe.each(HARNESSES)('$name publishes hostile values as values', (harness) => {
  let opened: Opened;
  let recorded: ReturnType<typeof recordingAdapter>;
  let outboxer: Outboxer<never, boolean>;
  let log: () => LoggedStatement[];
  let snapshot: () => Promise<unknown>;
  let canary: () => Promise<unknown>;
  let close: () => Promise<void>;
  let before: unknown;
  /** The insert a plain message gets, as the engine hands it to the adapter. */
  let insert: string;
  /** What must stay of a statement on its way to the server: its text, or its skeleton when the library inlines values. */
  const shape = harness.inlinesValues ? skeleton : normalize;

  beforeAll(async () => {
    let target: Target;
    if (harness.kind === 'postgres') {
      const scratch = await postgresScratch();
      target = { kind: 'postgres', url: scratch.url, schema: scratch.schema };
      log = () => scratch.wire.statements;
      snapshot = () => scratch.snapshot();
      canary = () => scratch.canary();
      close = () => scratch.close();
    } else {
      const scratch = sqliteScratch();
      target = { kind: 'sqlite', file: scratch.file };
      log = scratch.statements;
      snapshot = async () => scratch.snapshot();
      canary = async () => scratch.canary();
      close = async () => scratch.close();
    }
    opened = await harness.open(target);
    recorded = recordingAdapter(opened.database);
    recorded.recording.on = true;
    const postgres = harness.kind === 'postgres';
    // serializeWrites and notify put the group key and the outbox into the statement as well.
    outboxer = new Outboxer({
      database: recorded.adapter,
      relay: false,
      outboxes: { events: { table: 'sec_events', serializeWrites: postgres, notify: postgres } },
    }) as Outboxer<never, boolean>;
    await outboxer.migrate();
    before = await snapshot();
  });

  afterAll(async () => {
    // No table dropped or created, and the canary untouched.
    let after: unknown;
    try {
      after = await snapshot();
    } finally {
      await opened?.close();
      await close?.();
    }
    expect(after).toEqual(before);
  });

  /** Publishes in a transaction of the library; what the engine and the database saw meanwhile. */
  async function publish(message: Message) {
    let seen: { id: number; texts: string[]; received: LoggedStatement[] } | undefined;
    await opened.transaction((tx) => {
      const texts = recorded.texts.length;
      const received = log().length;
      const done = (id: number) => {
        seen = {
          id,
          texts: recorded.texts.slice(texts),
          received: log()
            .slice(received)
            .filter((s) => !isTransactionControl(s.text)),
        };
      };
      const { payload, ...options } = message;
      const id = outboxer.publish(tx, 'events', payload, options) as number | Promise<number>;
      return id instanceof Promise ? id.then(done) : done(id);
    });
    return seen!;
  }

  async function expectReadBack(id: number, message: Message): Promise<void> {
    const found = (await outboxer.listPending('events', { limit: 10_000 })).find((m) => m.id === id);
    expect(found, `message ${id}`).toBeDefined();
    expect({
      payload: found!.payload,
      groupKey: found!.groupKey,
      type: found!.type,
      headers: found!.headers,
    }).toEqual(message);
  }

  test('a plain message: the engine sends one insert, and the database receives just that', async () => {
    const { id, texts, received } = await publish(PLAIN);
    expect(texts).toHaveLength(1);
    insert = texts[0]!;
    expect(insert).toMatch(/INSERT INTO/);
    expect(received.map((s) => shape(s.text))).toEqual([shape(insert)]);
    await expectReadBack(id, PLAIN);
  });

  test.each(HOSTILE_VALUES.map((v) => [JSON.stringify(v), v]))(
    'a message full of %s: the same one statement, the value bound, the message back exactly',
    async (_label, value) => {
      const message = hostileMessage(value);
      const { id, texts, received } = await publish(message);
      expect(texts).toEqual([insert]);
      expect(received.map((s) => shape(s.text))).toEqual([shape(insert)]);
      if (harness.inlinesValues) {
        // Written into the text by the library, each value inside one literal (see shape above).
        expect(received[0]!.text).toContain(pg.escapeLiteral(JSON.stringify(message.payload)));
        expect(received[0]!.text).toContain(pg.escapeLiteral(value));
      } else {
        // Bound: the payload as the JSON the engine encoded, the value as it is.
        expect(received[0]!.values).toContain(JSON.stringify(message.payload));
        expect(received[0]!.values).toContain(value);
      }
      await expectReadBack(id, message);
      expect(await canary()).toEqual(CANARY);
    },
  );

  test('publishMany of every hostile message: one statement for them all, each message back exactly', async () => {
    const messages = HOSTILE_VALUES.map(hostileMessage);
    let ids: number[] = [];
    const texts = recorded.texts.length;
    const received = log().length;
    await opened.transaction((tx) => {
      const inputs = messages.map((m): PublishInput => ({ outbox: 'events', ...m }));
      const result = outboxer.publishMany(tx, inputs) as number[] | Promise<number[]>;
      return result instanceof Promise ? result.then((r) => void (ids = r)) : void (ids = result);
    });
    expect(recorded.texts.slice(texts)).toHaveLength(1);
    const sent = recorded.texts[texts]!;
    expect(
      log()
        .slice(received)
        .filter((s) => !isTransactionControl(s.text))
        .map((s) => shape(s.text)),
    ).toEqual([shape(sent)]);
    expect(sent).not.toMatch(/victim/i);
    for (const [i, message] of messages.entries()) await expectReadBack(ids[i]!, message);
    expect(await canary()).toEqual(CANARY);
  });
});
