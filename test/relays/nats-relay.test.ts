/**
 * What the NATS relay sends and how it reads JetStream's answers, against the server on
 * 127.0.0.1:4222: headers and Nats-Msg-Id, deduplication, subjects, refused messages.
 */
import { connect, headers, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import {
  jetstream,
  jetstreamManager,
  type JetStreamClient,
  type JetStreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  DeliveryError,
  OutboxerError,
  PermanentError,
  SKIPPED,
  type DeliveryOutcome,
  type Envelope,
} from 'outboxer';
import { natsRelay, type NatsRelayOptions } from 'outboxer/nats';
import { makeContext, makeEnvelope } from '../support/envelopes.js';
import { invalidOptions } from './contract.js';

const random = () => Math.random().toString(36).slice(2, 10);

let nc: NatsConnection;
let js: JetStreamClient;
let jsm: JetStreamManager;
const streams: string[] = [];

beforeAll(async () => {
  nc = await connect({ servers: '127.0.0.1:4222' });
  js = jetstream(nc);
  jsm = await jetstreamManager(nc);
});
afterAll(async () => {
  for (const name of streams) await jsm.streams.delete(name);
  await nc.close();
});

/** A stream on `<subject>.>` with a random name and subject. */
async function stream(config: Partial<StreamConfig> = {}) {
  const name = `OUTBOXER_${random().toUpperCase()}`;
  const subject = `outboxer.${random()}`;
  await jsm.streams.add({ name, subjects: [`${subject}.>`], ...config });
  streams.push(name);
  return { name, subject };
}

const envelope = (id: number, groupKey: string | null, extra: Partial<Envelope> = {}) =>
  makeEnvelope({ id, groupKey, type: 'order.paid', ...extra });

async function deliver(
  options: Partial<NatsRelayOptions<MsgHdrs>> & Pick<NatsRelayOptions, 'subject'>,
  batch: Envelope[],
  signal?: AbortSignal,
): Promise<DeliveryOutcome[]> {
  const relay = natsRelay({ jetstream: js, createHeaders: headers, ...options });
  await relay.start!();
  return (await relay.deliver(batch, makeContext({ signal }))) as DeliveryOutcome[];
}

const errorOf = (outcome: DeliveryOutcome | undefined): Error => (outcome as { error: Error }).error;

describe('nats relay', () => {
  test('publishes the JSON payload with Nats-Msg-Id = outbox id and the standard headers', async () => {
    const { name, subject } = await stream();
    const outcomes = await deliver({ subject: `${subject}.events` }, [
      envelope(7, 'order:1', {
        headers: { traceparent: '00-abc-01' },
        payload: { total: 12.5, text: 'héllo' },
      }),
    ]);
    expect(outcomes).toEqual([{ ok: true }]);
    const stored = await jsm.streams.getMessage(name, { seq: 1 });
    expect(stored!.subject).toBe(`${subject}.events`);
    expect(stored!.json()).toEqual({ total: 12.5, text: 'héllo' });
    expect(Object.fromEntries([...stored!.header].map(([key, values]) => [key, values.join(',')]))).toEqual({
      traceparent: '00-abc-01',
      'outboxer-id': '7',
      'outboxer-outbox': 'events',
      'outboxer-type': 'order.paid',
      'outboxer-group-key': 'order:1',
      'Nats-Msg-Id': '7',
    });
  });

  test('a redelivery within the duplicate window is acknowledged as a duplicate and stored once', async () => {
    const { name, subject } = await stream();
    expect(await deliver({ subject: `${subject}.events` }, [envelope(1, 'a'), envelope(2, 'a')])).toEqual([
      { ok: true },
      { ok: true },
    ]);
    // The relay counts the repeat as delivered: the stream already has it.
    expect(await deliver({ subject: `${subject}.events` }, [envelope(1, 'a'), envelope(2, 'a')])).toEqual([
      { ok: true },
      { ok: true },
    ]);
    expect((await jsm.streams.info(name)).state.messages).toBe(2);
    // What the relay relies on: the PubAck of a repeated Nats-Msg-Id says duplicate.
    const h = headers();
    h.set('outboxer-id', '1');
    expect(await js.publish(`${subject}.events`, '{}', { msgID: '1', headers: h })).toMatchObject({
      stream: name,
      seq: 1,
      duplicate: true,
    });
  });

  test('two outbox tables in one stream: their ids collide as Nats-Msg-Id unless messageId tells them apart', async () => {
    const { name, subject } = await stream();
    const orders = envelope(1, 'a', { outbox: 'orders' });
    const invoices = envelope(1, 'a', { outbox: 'invoices' });
    // Default: both are Nats-Msg-Id 1, and the stream drops the second as a repeat.
    expect(await deliver({ subject: `${subject}.events` }, [orders, invoices])).toEqual([
      { ok: true },
      { ok: true },
    ]);
    expect((await jsm.streams.info(name)).state.messages).toBe(1);
    const messageId = (m: Envelope) => `${m.outbox}-${m.id}`;
    expect(await deliver({ subject: `${subject}.events`, messageId }, [orders, invoices])).toEqual([
      { ok: true },
      { ok: true },
    ]);
    expect((await jsm.streams.getMessage(name, { seq: 3 }))!.header.get('Nats-Msg-Id')).toBe('invoices-1');
  });

  test('the subject can be a function of the envelope; one with no stream fails retryably and says so, the others go', async () => {
    const { name, subject } = await stream();
    const outcomes = await deliver(
      { subject: (m) => (m.groupKey === 'lost' ? `nowhere.${random()}` : `${subject}.${m.groupKey}`) },
      [envelope(1, 'lost'), envelope(2, 'lost'), envelope(3, 'g1'), envelope(4, 'g2')],
    );
    expect(errorOf(outcomes[0])).toBeInstanceOf(DeliveryError);
    expect((errorOf(outcomes[0]) as DeliveryError).permanent).toBe(false);
    expect(errorOf(outcomes[0]).message).toMatch(/No JetStream stream captures subject "nowhere\./);
    expect(outcomes.slice(1)).toEqual([{ ok: false, error: SKIPPED }, { ok: true }, { ok: true }]);
    expect((await jsm.streams.getMessage(name, { seq: 2 }))!.subject).toBe(`${subject}.g2`);
  });

  test('partial failure: a refused message fails, the rest of its group is not sent, other groups go on', async () => {
    // The stream takes one message and refuses the rest (discard: new): "maximum messages exceeded".
    const { name, subject } = await stream({ max_msgs: 1, discard: 'new' as StreamConfig['discard'] });
    const outcomes = await deliver({ subject: `${subject}.events` }, [
      envelope(1, 'a'),
      envelope(2, 'b'),
      envelope(3, 'a'),
      envelope(4, 'b'),
    ]);
    expect(outcomes[0]).toEqual({ ok: true });
    expect(errorOf(outcomes[1]).message).toMatch(/maximum messages exceeded/);
    expect((errorOf(outcomes[1]) as DeliveryError).permanent).toBe(false);
    expect(errorOf(outcomes[2]).message).toMatch(/maximum messages exceeded/);
    expect(outcomes[3]).toEqual({ ok: false, error: SKIPPED });
    expect((await jsm.streams.info(name)).state.messages).toBe(1);
  });

  test('strictOrder: false publishes the whole batch at once: after a refusal, a later message of the group may be stored', async () => {
    const full = await stream({ max_msgs: 1, discard: 'new' as StreamConfig['discard'] });
    await js.publish(`${full.subject}.x`, '{}');
    const open = await stream();
    const to = (m: Envelope) => `${String((m.payload as { to: string }).to)}.events`;
    const batch = [
      envelope(1, 'a', { payload: { to: full.subject } }),
      envelope(2, 'a', { payload: { to: open.subject } }),
    ];
    const strict = await deliver({ subject: to }, batch);
    expect(strict[1]).toEqual({ ok: false, error: SKIPPED });
    expect((await jsm.streams.info(open.name)).state.messages).toBe(0); // never sent
    const loose = await deliver({ subject: to, strictOrder: false }, batch);
    expect(errorOf(loose[0]).message).toMatch(/maximum messages exceeded/);
    expect(loose[1]).toEqual({ ok: false, error: SKIPPED }); // not counted as delivered…
    expect((await jsm.streams.info(open.name)).state.messages).toBe(1); // …though it is stored, ahead of 1
  });

  test('messages NATS can never take fail permanently: too large, an invalid subject or header', async () => {
    const { subject } = await stream({ max_msg_size: 200 });
    const outcomes = await deliver(
      {
        subject: (m) =>
          m.groupKey === 'bad-subject'
            ? `${subject}.a b`
            : m.groupKey === 'throws'
              ? (() => {
                  throw new Error('no subject');
                })()
              : `${subject}.ok`,
      },
      [
        envelope(1, 'big', { payload: { text: 'x'.repeat(500) } }),
        envelope(2, 'bad-subject'),
        envelope(3, 'throws'),
        envelope(4, 'bad-header', { headers: { 'bad name': 'v' } }),
        envelope(5, 'bad-value', { headers: { note: 'line\r\nbreak' } }),
        envelope(6, 'fine'),
      ],
    );
    for (const outcome of outcomes.slice(0, 5)) expect(errorOf(outcome)).toBeInstanceOf(PermanentError);
    expect(errorOf(outcomes[0]).message).toMatch(/too large.*message size exceeds maximum/);
    expect(errorOf(outcomes[1]).message).toMatch(/white space/);
    expect(errorOf(outcomes[2]).message).toMatch(/subject threw.*no subject/);
    expect(errorOf(outcomes[3]).message).toMatch(/header name/);
    expect(errorOf(outcomes[4]).message).toMatch(/cannot contain/);
    expect(outcomes[5]).toEqual({ ok: true });
  });

  test('start() reports a subject no stream captures as RELAY_MISCONFIGURED, unless told not to check', async () => {
    const subject = `outboxer.nowhere.${random()}`;
    const error = await natsRelay({ jetstream: js, createHeaders: headers, subject }).start!().catch(
      (e: unknown) => e,
    );
    expect((error as OutboxerError).code).toBe('RELAY_MISCONFIGURED');
    expect((error as OutboxerError).message).toMatch(
      /No JetStream stream captures subject "outboxer\.nowhere\..*jsm\.streams\.add/,
    );
    await natsRelay({ jetstream: js, createHeaders: headers, subject, checkStream: false }).start!();
    await natsRelay({ jetstream: js, createHeaders: headers, subject: () => subject }).start!();
  });

  test('a closed connection is reported with what to do about it', async () => {
    const { subject } = await stream();
    const own = await connect({ servers: '127.0.0.1:4222' });
    const relay = natsRelay({
      jetstream: jetstream(own),
      createHeaders: headers,
      subject: `${subject}.events`,
    });
    await own.close();
    const [outcome] = (await relay.deliver([envelope(1, 'a')], makeContext())) as DeliveryOutcome[];
    expect(errorOf(outcome).message).toMatch(/closed for good.*maxReconnectAttempts: -1/);
  });

  test('sends nothing once the signal fired', async () => {
    const { name, subject } = await stream();
    const controller = new AbortController();
    controller.abort(new Error('shutting down'));
    const outcomes = await deliver(
      { subject: `${subject}.events` },
      [envelope(1, 'a'), envelope(2, null)],
      controller.signal,
    );
    // Nothing was sent, so no attempt is counted: skipped, like deliverEach reports them.
    expect(outcomes).toEqual([
      { ok: false, error: SKIPPED },
      { ok: false, error: SKIPPED },
    ]);
    expect((await jsm.streams.info(name)).state.messages).toBe(0);
  });

  test('options are validated in the factory', () => {
    const invalid = (options: unknown) => invalidOptions(() => natsRelay(options as NatsRelayOptions));
    const base = { jetstream: js, createHeaders: headers, subject: 'orders.events' };
    expect(invalid(null)).toMatch(/natsRelay\(options\)/);
    expect(invalid({ ...base, jetstream: nc.info })).toMatch(
      /"natsRelay.jetstream" must be a JetStream client/,
    );
    expect(invalid({ ...base, createHeaders: undefined })).toMatch(
      /"natsRelay.createHeaders" must be the headers function/,
    );
    expect(invalid({ ...base, subject: 'orders.*' })).toMatch(/"natsRelay.subject".*wildcard/);
    expect(invalid({ ...base, subject: 'orders..events' })).toMatch(/empty token/);
    expect(invalid({ ...base, subject: '' })).toMatch(/"natsRelay.subject"/);
    expect(invalid({ ...base, timeout: -1 })).toMatch(/"natsRelay.timeout" must be an integer/);
    expect(invalid({ ...base, strictOrder: 'no' })).toMatch(/"natsRelay.strictOrder" must be true or false/);
    expect(invalid({ ...base, messageId: 'id' })).toMatch(/"natsRelay.messageId" must be a function/);
    expect(invalid({ ...base, stream: 'X' })).toMatch(/Unknown option "natsRelay.stream"/);
    expect(natsRelay(base).name).toBe('nats');
  });
});
