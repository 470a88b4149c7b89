/**
 * Focused tests of outboxer/sqs against ElasticMQ (scripts/services/sqs.sh): FIFO attributes and
 * deduplication, rounds (one message per group per call), partial batch failures reported by the
 * server, messages refused before sending, headers as attributes, misconfiguration, options.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import * as sqs from '@aws-sdk/client-sqs';
import { SKIPPED, isOutboxerError, type DeliveryOutcome, type Envelope, type Relay } from 'outboxer';
import {
  PACKED_HEADERS_ATTRIBUTE,
  SQS_LIMITS,
  sqsRelay,
  toSqsId,
  type SqsClientLike,
  type SqsCommands,
  type SqsRelayOptions,
} from 'outboxer/sqs';
import { makeContext, makeEnvelope } from '../support/envelopes.js';
import { invalidOptions } from './contract.js';

const ENDPOINT = 'http://127.0.0.1:9324';
const client = new sqs.SQSClient({
  endpoint: ENDPOINT,
  region: 'us-east-1',
  credentials: { accessKeyId: 'outboxer', secretAccessKey: 'outboxer' },
});
const queues: string[] = [];

afterAll(async () => {
  for (const queueUrl of queues)
    await client.send(new sqs.DeleteQueueCommand({ QueueUrl: queueUrl })).catch(() => undefined);
  client.destroy();
});

async function createQueue(fifo: boolean): Promise<string> {
  const name = `outboxer-focus-${Math.random().toString(36).slice(2, 10)}${fifo ? '.fifo' : ''}`;
  const { QueueUrl } = await client.send(
    new sqs.CreateQueueCommand({ QueueName: name, Attributes: fifo ? { FifoQueue: 'true' } : {} }),
  );
  queues.push(QueueUrl!);
  return QueueUrl!;
}

interface Arrived {
  body: string;
  attributes: Record<string, string>;
  groupId: string | undefined;
  dedupeId: string | undefined;
}

/** ReceiveMessage (10 at a time, 1 s long polls), delete what was read, until the queue is empty. */
async function receiveAll(queueUrl: string): Promise<Arrived[]> {
  const arrived: Arrived[] = [];
  for (;;) {
    const { Messages = [] } = await client.send(
      new sqs.ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['All'],
      }),
    );
    if (Messages.length === 0) return arrived;
    for (const m of Messages) {
      arrived.push({
        body: m.Body!,
        attributes: Object.fromEntries(
          Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [k, v.StringValue!]),
        ),
        groupId: m.Attributes?.MessageGroupId,
        dedupeId: m.Attributes?.MessageDeduplicationId,
      });
    }
    await client.send(
      new sqs.DeleteMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: Messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
      }),
    );
  }
}

const envelope = (groupKey: string | null, payload?: unknown, extra: Partial<Envelope> = {}) =>
  makeEnvelope({ groupKey, payload, ...extra });

/** SendMessageBatch inputs the relay built, recorded on their way to the real SDK command. */
function recordingCommands(
  calls: sqs.SendMessageBatchRequestEntry[][],
  tamper?: (entry: sqs.SendMessageBatchRequestEntry) => void,
): SqsCommands {
  class RecordingSendMessageBatchCommand extends sqs.SendMessageBatchCommand {
    constructor(input: sqs.SendMessageBatchCommandInput) {
      const entries = input.Entries!.map((entry) => ({ ...entry }));
      entries.forEach((entry) => tamper?.(entry));
      calls.push(entries);
      super({ ...input, Entries: entries });
    }
  }
  return {
    SendMessageBatchCommand: RecordingSendMessageBatchCommand,
    GetQueueAttributesCommand: sqs.GetQueueAttributesCommand,
  };
}

async function started(options: Partial<SqsRelayOptions> & { queueUrl: string }): Promise<Relay> {
  const relay = sqsRelay({ client, ...options });
  await relay.start!();
  return relay;
}

function outcomeSummary(outcomes: readonly DeliveryOutcome[] | void): string[] {
  return (outcomes ?? []).map((o) =>
    o.ok ? 'ok' : o.error === SKIPPED ? 'skipped' : (o.error as Error).name,
  );
}

describe('FIFO queue', () => {
  let queueUrl: string;
  beforeAll(async () => {
    queueUrl = await createQueue(true);
  });

  test('sends group key, outbox id and standard headers as MessageGroupId, MessageDeduplicationId and attributes', async () => {
    const relay = await started({ queueUrl });
    const keyed = envelope(
      'order:42',
      { total: 10 },
      { type: 'OrderPaid', headers: { traceparent: '00-abc-def-01' } },
    );
    const unkeyed = envelope(null, { ping: true });
    expect(outcomeSummary(await relay.deliver([keyed, unkeyed], makeContext()))).toEqual(['ok', 'ok']);
    const arrived = await receiveAll(queueUrl);
    expect(arrived).toHaveLength(2);
    const [first, second] = [
      arrived.find((m) => m.attributes['outboxer-id'] === String(keyed.id))!,
      arrived.find((m) => m.attributes['outboxer-id'] === String(unkeyed.id))!,
    ];
    expect(first).toEqual({
      body: '{"total":10}',
      attributes: {
        'outboxer-id': String(keyed.id),
        'outboxer-outbox': 'events',
        'outboxer-type': 'OrderPaid',
        'outboxer-group-key': 'order:42',
        traceparent: '00-abc-def-01',
      },
      groupId: 'order:42',
      dedupeId: String(keyed.id),
    });
    // A message without group key is its own group: it neither waits for nor holds up anything.
    expect(second.groupId).toBe(String(unkeyed.id));
    expect(second.attributes).toEqual({ 'outboxer-id': String(unkeyed.id), 'outboxer-outbox': 'events' });
  });

  test('total ordering puts the whole outbox in one message group; keys SQS does not accept are hashed', async () => {
    const relay = await started({ queueUrl });
    const batch = [envelope('a'), envelope('b')];
    expect(outcomeSummary(await relay.deliver(batch, makeContext({ ordering: 'total' })))).toEqual([
      'ok',
      'ok',
    ]);
    expect((await receiveAll(queueUrl)).map((m) => m.groupId)).toEqual(['events', 'events']);

    const odd = [envelope('commande é 42'), envelope('x'.repeat(200)), envelope('commande é 42')];
    expect(outcomeSummary(await relay.deliver(odd, makeContext()))).toEqual(['ok', 'ok', 'ok']);
    const arrived = await receiveAll(queueUrl);
    const groupOf = new Map(arrived.map((m) => [Number(m.attributes['outboxer-id']), m.groupId]));
    expect(odd.map((m) => groupOf.get(m.id))).toEqual([
      toSqsId('commande é 42'),
      toSqsId('x'.repeat(200)),
      toSqsId('commande é 42'),
    ]);
    expect(toSqsId('commande é 42')).toMatch(/^sha256:[A-Za-z0-9_-]{43}$/);
    expect(arrived.map((m) => m.attributes['outboxer-group-key']).sort()).toEqual([
      'commande é 42',
      'commande é 42',
      'x'.repeat(200),
    ]);
  });

  test('SQS drops a redelivery with the same MessageDeduplicationId within its 5-minute window', async () => {
    // The server itself: the same MessageDeduplicationId twice, a second apart, is one message.
    const raw = {
      QueueUrl: queueUrl,
      Entries: [{ Id: '1', MessageBody: 'first', MessageGroupId: 'd', MessageDeduplicationId: 'raw-1' }],
    };
    await client.send(new sqs.SendMessageBatchCommand(raw));
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const again = await client.send(
      new sqs.SendMessageBatchCommand({ ...raw, Entries: [{ ...raw.Entries[0]!, MessageBody: 'second' }] }),
    );
    expect(again.Successful).toHaveLength(1);
    expect((await receiveAll(queueUrl)).map((m) => m.body)).toEqual(['first']);

    // Through the relay: a batch delivered again (its acknowledgement was lost) arrives once.
    const relay = await started({ queueUrl });
    const batch = [envelope('g'), envelope('g'), envelope(null)];
    expect(outcomeSummary(await relay.deliver(batch, makeContext()))).toEqual(['ok', 'ok', 'ok']);
    expect(outcomeSummary(await relay.deliver(batch, makeContext()))).toEqual(['ok', 'ok', 'ok']);
    expect(
      (await receiveAll(queueUrl)).map((m) => Number(m.attributes['outboxer-id'])).sort((a, b) => a - b),
    ).toEqual(batch.map((m) => m.id));
  });

  test('ElasticMQ, like SQS, enqueues the later entries of a group when a middle one fails: hence one entry per group per call', async () => {
    const result = await client.send(
      new sqs.SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: [
          { Id: 'a', MessageBody: 'A', MessageGroupId: 'p', MessageDeduplicationId: 'p-a' },
          { Id: 'b', MessageBody: 'B\u0001', MessageGroupId: 'p', MessageDeduplicationId: 'p-b' },
          { Id: 'c', MessageBody: 'C', MessageGroupId: 'p', MessageDeduplicationId: 'p-c' },
        ],
      }),
    );
    expect(result.Successful?.map((e) => e.Id)).toEqual(['a', 'c']);
    expect(result.Failed).toEqual([expect.objectContaining({ Id: 'b', SenderFault: true })]);
    expect((await receiveAll(queueUrl)).map((m) => m.body)).toEqual(['A', 'C']);
  });

  test('never puts two messages of one group in a call, and at most 10 entries per call', async () => {
    const calls: sqs.SendMessageBatchRequestEntry[][] = [];
    const relay = await started({ queueUrl, commands: recordingCommands(calls) });
    const batch = Array.from({ length: 60 }, (_, i) => envelope(i % 5 === 4 ? null : `k${i % 4}`));
    const outcomes = await relay.deliver(batch, makeContext());
    expect(outcomeSummary(outcomes).every((o) => o === 'ok')).toBe(true);
    for (const call of calls) {
      expect(call.length).toBeLessThanOrEqual(10);
      expect(new Set(call.map((e) => e.MessageGroupId)).size).toBe(call.length);
    }
    const arrived = await receiveAll(queueUrl);
    for (const key of ['k0', 'k1', 'k2', 'k3']) {
      const ids = arrived.filter((m) => m.groupId === key).map((m) => Number(m.attributes['outboxer-id']));
      expect(ids).toEqual(batch.filter((m) => m.groupKey === key).map((m) => m.id));
    }
  });

  test('a Failed[] entry of a 200 response fails its message (SenderFault: permanent), skips the rest of its group, and other groups go on', async () => {
    const calls: sqs.SendMessageBatchRequestEntry[][] = [];
    const batch = [envelope('g'), envelope('h'), envelope('g'), envelope('g'), envelope('h')];
    const poisoned = String(batch[2]!.id);
    // Fault injection on the real server: corrupt one body after the relay's own checks passed it.
    const commands = recordingCommands(calls, (entry) => {
      if (entry.Id === poisoned) entry.MessageBody = `${entry.MessageBody}\u0001`;
    });
    const relay = await started({ queueUrl, commands });
    const outcomes = (await relay.deliver(batch, makeContext())) as DeliveryOutcome[];
    expect(outcomeSummary(outcomes)).toEqual(['ok', 'ok', 'PermanentError', 'skipped', 'ok']);
    expect((outcomes[2] as { error: Error }).error.message).toMatch(
      new RegExp(`SQS rejected message ${poisoned}: InvalidAttributeValue: InvalidMessageContents`),
    );
    expect(calls.flat().map((e) => e.Id)).not.toContain(String(batch[3]!.id));
    const arrived = await receiveAll(queueUrl);
    expect(arrived.map((m) => Number(m.attributes['outboxer-id'])).sort((a, b) => a - b)).toEqual([
      batch[0]!.id,
      batch[1]!.id,
      batch[4]!.id,
    ]);
  });

  test('refuses bodies and attributes with characters outside XML 1.0 before sending, and keeps order for the group', async () => {
    const calls: sqs.SendMessageBatchRequestEntry[][] = [];
    const relay = await started({ queueUrl, commands: recordingCommands(calls) });
    const batch = [
      envelope('g', { text: 'fine' }),
      envelope('g', { text: 'bad \uFFFE' }),
      envelope('g', { text: 'later' }),
      envelope('h', { text: 'header' }, { headers: { note: 'bell \u0007' } }),
      envelope('i', { text: 'lone \uD800 surrogate is escaped by JSON' }),
    ];
    const outcomes = (await relay.deliver(batch, makeContext())) as DeliveryOutcome[];
    expect(outcomeSummary(outcomes)).toEqual(['ok', 'PermanentError', 'skipped', 'PermanentError', 'ok']);
    expect((outcomes[1] as { error: Error }).error.message).toContain('the body contains U+FFFE');
    expect((outcomes[3] as { error: Error }).error.message).toContain('attribute "note" contains U+0007');
    const sent = calls.flat().map((e) => Number(e.Id));
    expect(sent.sort((a, b) => a - b)).toEqual([batch[0]!.id, batch[4]!.id]);
    expect(await receiveAll(queueUrl)).toHaveLength(2);
  });
});

describe('sizes', () => {
  let queueUrl: string;
  beforeAll(async () => {
    queueUrl = await createQueue(true);
  });

  function sized(groupKey: string, total: number): Envelope {
    const probe = envelope(groupKey, '');
    // Body is JSON: a string payload of n characters is n + 2 bytes. Attributes: name + "String" + value.
    const attributeBytes =
      ['outboxer-id', String(probe.id), 'outboxer-outbox', 'events', 'outboxer-group-key', groupKey].reduce(
        (n, s) => n + s.length,
        0,
      ) +
      3 * 6;
    return { ...probe, payload: 'x'.repeat(total - attributeBytes - 2) };
  }

  test('a message of exactly 1 MiB (body and attributes) is sent; one byte more is refused before sending and its group stops', async () => {
    const calls: sqs.SendMessageBatchRequestEntry[][] = [];
    const relay = await started({ queueUrl, commands: recordingCommands(calls) });
    const batch = [
      sized('big', SQS_LIMITS.messageBytes),
      sized('big', SQS_LIMITS.messageBytes + 1),
      envelope('big'),
    ];
    const outcomes = (await relay.deliver(batch, makeContext())) as DeliveryOutcome[];
    expect(outcomeSummary(outcomes)).toEqual(['ok', 'PermanentError', 'skipped']);
    expect((outcomes[1] as { error: Error }).error.message).toContain(
      `is ${SQS_LIMITS.messageBytes + 1} bytes`,
    );
    expect(calls.flat().map((e) => Number(e.Id))).toEqual([batch[0]!.id]);
    expect(await receiveAll(queueUrl)).toHaveLength(1);
  });

  test('splits a round into calls of at most 1 MiB', async () => {
    const calls: sqs.SendMessageBatchRequestEntry[][] = [];
    const relay = await started({ queueUrl, commands: recordingCommands(calls) });
    const batch = ['a', 'b', 'c', 'd', 'e'].map((key) => sized(key, 400_000));
    expect(outcomeSummary(await relay.deliver(batch, makeContext()))).toEqual(['ok', 'ok', 'ok', 'ok', 'ok']);
    expect(calls.map((call) => call.length)).toEqual([2, 2, 1]);
    expect(await receiveAll(queueUrl)).toHaveLength(5);
  });
});

describe('headers as message attributes', () => {
  let queueUrl: string;
  beforeAll(async () => {
    queueUrl = await createQueue(false);
  });

  test('own headers are separate attributes while all fit in 10; otherwise packed as JSON into outboxer-headers', async () => {
    const relay = await started({ queueUrl });
    const six = Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`h${i}`, `v${i}`]));
    const seven = { ...six, h6: 'v6' };
    const badName = { 'not valid': 'v', 'AWS.reserved': 'w' };
    const batch = [
      envelope('g', 1, { type: 'T', headers: six }),
      envelope('g', 2, { type: 'T', headers: seven }),
      envelope(null, 3, { headers: badName }),
      envelope(null, 4, { headers: { empty: '' } }),
    ];
    expect(outcomeSummary(await relay.deliver(batch, makeContext()))).toEqual(['ok', 'ok', 'ok', 'ok']);
    const byBody = new Map((await receiveAll(queueUrl)).map((m) => [m.body, m.attributes]));
    expect(Object.keys(byBody.get('1')!)).toHaveLength(10);
    expect(byBody.get('1')).toMatchObject(six);
    expect(byBody.get('2')).toEqual({
      'outboxer-id': String(batch[1]!.id),
      'outboxer-outbox': 'events',
      'outboxer-type': 'T',
      'outboxer-group-key': 'g',
      [PACKED_HEADERS_ATTRIBUTE]: JSON.stringify(seven),
    });
    expect(JSON.parse(byBody.get('3')![PACKED_HEADERS_ATTRIBUTE]!)).toEqual(badName);
    expect(JSON.parse(byBody.get('4')![PACKED_HEADERS_ATTRIBUTE]!)).toEqual({ empty: '' });
  });
});

describe('standard queue', () => {
  test('sends no MessageGroupId or MessageDeduplicationId unless messageGroupId is set (SQS fair queues)', async () => {
    const queueUrl = await createQueue(false);
    const plain = await started({ queueUrl });
    expect(outcomeSummary(await plain.deliver([envelope('tenant-1')], makeContext()))).toEqual(['ok']);
    expect(await receiveAll(queueUrl)).toEqual([
      expect.objectContaining({ groupId: undefined, dedupeId: undefined }),
    ]);

    const fair = await started({ queueUrl, messageGroupId: (m) => m.groupKey ?? 'none' });
    expect(outcomeSummary(await fair.deliver([envelope('tenant-2')], makeContext()))).toEqual(['ok']);
    expect(await receiveAll(queueUrl)).toEqual([
      expect.objectContaining({ groupId: 'tenant-2', dedupeId: undefined }),
    ]);
  });
});

describe('misconfiguration and outages', () => {
  test('start() throws RELAY_MISCONFIGURED for a queue that does not exist', async () => {
    const relay = sqsRelay({ client, queueUrl: `${ENDPOINT}/000000000000/outboxer-nope-${Date.now()}.fifo` });
    const error = await relay.start!().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isOutboxerError(error) && error.code).toBe('RELAY_MISCONFIGURED');
    expect((error as Error).message).toMatch(/does not exist .*\. Create it/);
  });

  test('start() throws RELAY_MISCONFIGURED when the SDK cannot get credentials (ElasticMQ itself accepts any)', async () => {
    const noCredentials = new sqs.SQSClient({
      endpoint: ENDPOINT,
      region: 'us-east-1',
      credentials: async () => {
        throw Object.assign(new Error('Could not load credentials from any providers'), {
          name: 'CredentialsProviderError',
        });
      },
    });
    try {
      const queueUrl = await createQueue(false);
      const error = await sqsRelay({ client: noCredentials, queueUrl }).start!().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isOutboxerError(error) && error.code).toBe('RELAY_MISCONFIGURED');
      expect((error as Error).message).toMatch(/credentials/);
    } finally {
      noCredentials.destroy();
    }
  });

  test('an unreachable SQS does not fail start(); deliveries fail retryably until it answers', async () => {
    const queueUrl = await createQueue(true);
    const unreachable = new sqs.SQSClient({
      endpoint: 'http://127.0.0.1:9',
      region: 'us-east-1',
      credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
      maxAttempts: 1,
    });
    try {
      const relay = sqsRelay({ client: unreachable, queueUrl });
      await relay.start!();
      const error = await relay.deliver([envelope('g')], makeContext()).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(
        isOutboxerError(error) && {
          code: error.code,
          permanent: (error as { permanent?: boolean }).permanent,
        },
      ).toEqual({ code: 'DELIVERY_FAILED', permanent: false });
      expect((error as Error).message).toMatch(/Could not reach SQS queue .*ECONNREFUSED/);
    } finally {
      unreachable.destroy();
    }
  });

  test('a queue deleted while running: retryable RELAY_MISCONFIGURED per message, delivered once it is back', async () => {
    const queueUrl = await createQueue(true);
    const relay = await started({ queueUrl });
    await client.send(new sqs.DeleteQueueCommand({ QueueUrl: queueUrl }));
    const outcomes = (await relay.deliver(
      [envelope('g'), envelope('g')],
      makeContext(),
    )) as DeliveryOutcome[];
    expect(outcomeSummary(outcomes)).toEqual(['OutboxerError', 'skipped']);
    const error = (outcomes[0] as { error: Error & { code: string; retryable: boolean } }).error;
    expect({ code: error.code, retryable: error.retryable }).toEqual({
      code: 'RELAY_MISCONFIGURED',
      retryable: true,
    });
    await client.send(
      new sqs.CreateQueueCommand({
        QueueName: new URL(queueUrl).pathname.split('/').pop()!,
        Attributes: { FifoQueue: 'true' },
      }),
    );
    expect(outcomeSummary(await relay.deliver([envelope('g')], makeContext()))).toEqual(['ok']);
  });

  test('an aborted delivery sends nothing and reports the abort reason', async () => {
    const calls: sqs.SendMessageBatchRequestEntry[][] = [];
    const relay = await started({ queueUrl: await createQueue(true), commands: recordingCommands(calls) });
    const controller = new AbortController();
    controller.abort(new Error('outboxer is stopping'));
    const outcomes = (await relay.deliver(
      [envelope('g'), envelope(null)],
      makeContext({ signal: controller.signal }),
    )) as DeliveryOutcome[];
    expect(outcomes.map((o) => !o.ok && (o.error as Error).message)).toEqual([
      'outboxer is stopping',
      'outboxer is stopping',
    ]);
    expect(calls).toEqual([]);
  });
});

describe('options', () => {
  test('a real SQSClient and the module of @aws-sdk/client-sqs fit the structural types (checked by tsc)', () => {
    const structural: { client: SqsClientLike; commands: SqsCommands } = { client, commands: sqs };
    expect(typeof structural.client.send).toBe('function');
  });

  const queueUrl = `${ENDPOINT}/000000000000/q.fifo`;
  test.each([
    [{ queueUrl }, /sqsRelay\.client/],
    [{ client, queueUrl: 'orders' }, /sqsRelay\.queueUrl/],
    [{ client, queueUrl: 'https://sqs.eu-west-1.amazonaws.com/' }, /sqsRelay\.queueUrl/],
    [{ client, queueUrl, concurrency: 0 }, /sqsRelay\.concurrency" must be an integer from 1 to 50/],
    [{ client, queueUrl, commands: {} }, /sqsRelay\.commands/],
    [{ client, queueUrl, body: 'json' }, /sqsRelay\.body" must be a function/],
    [
      { client, queueUrl: `${ENDPOINT}/000000000000/q`, deduplicationId: () => 'x' },
      /sqsRelay\.deduplicationId.*FIFO/,
    ],
    [{ client, queueUrl, topic: 'x' }, /Unknown option "sqsRelay\.topic"/],
  ])('rejects %#', (options, message) => {
    expect(invalidOptions(() => sqsRelay(options as unknown as SqsRelayOptions))).toMatch(message);
  });

  test('the default commands are loaded with a dynamic import, and src/relays/sqs imports nothing of the SDK statically', async () => {
    const dir = new URL('../../src/relays/sqs/', import.meta.url);
    for (const file of readdirSync(dir)) {
      const source = readFileSync(new URL(file, dir), 'utf8');
      expect(source, file).not.toMatch(/^import(?! type)[^;]*from '@aws-sdk/m);
    }
    const queueUrl = await createQueue(false);
    const relay = await started({ queueUrl });
    expect(outcomeSummary(await relay.deliver([envelope(null, 'dynamic')], makeContext()))).toEqual(['ok']);
    expect((await receiveAll(queueUrl)).map((m) => m.body)).toEqual(['"dynamic"']);
  });
});
