/**
 * Focused tests of outboxer/sqs against ElasticMQ (scripts/services/sqs.sh): FIFO attributes and
 * deduplication, rounds (one message per group per call), partial batch failures reported by the
 * server, messages refused before sending, standard queues. Sizes and headers as attributes are in
 * sqs-relay-limits.test.ts; misconfiguration, outages and options in sqs-relay-setup.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import * as sqs from '@aws-sdk/client-sqs';
import { type DeliveryOutcome } from 'outboxer';
import { toSqsId } from 'outboxer/sqs';
import { makeContext } from '../support/envelopes.js';
import {
  client,
  createQueue,
  deleteQueues,
  receiveAll,
  envelope,
  recordingCommands,
  started,
  outcomeSummary,
} from './sqs-queues.js';

afterAll(deleteQueues);

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
