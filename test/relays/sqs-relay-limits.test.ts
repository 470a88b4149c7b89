/**
 * outboxer/sqs against ElasticMQ at SQS's limits: messages of 1 MiB and calls split under it,
 * headers as separate attributes while they fit in 10, packed as JSON beyond.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import * as sqs from '@aws-sdk/client-sqs';
import { type DeliveryOutcome, type Envelope } from 'outboxer';
import { PACKED_HEADERS_ATTRIBUTE, SQS_LIMITS } from 'outboxer/sqs';
import { makeContext } from '../support/envelopes.js';
import {
  createQueue,
  deleteQueues,
  receiveAll,
  envelope,
  recordingCommands,
  started,
  outcomeSummary,
} from './sqs-queues.js';

afterAll(deleteQueues);

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
