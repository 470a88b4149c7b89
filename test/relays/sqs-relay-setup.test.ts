/**
 * outboxer/sqs against ElasticMQ when it is set up wrong or unreachable (a missing queue, no
 * credentials, an outage, a queue deleted while running, an aborted delivery), and its options.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, describe, expect, test } from 'vitest';
import * as sqs from '@aws-sdk/client-sqs';
import { isOutboxerError, type DeliveryOutcome } from 'outboxer';
import { sqsRelay, type SqsClientLike, type SqsCommands, type SqsRelayOptions } from 'outboxer/sqs';
import { makeContext } from '../support/envelopes.js';
import { invalidOptions } from './contract.js';
import {
  ENDPOINT,
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
