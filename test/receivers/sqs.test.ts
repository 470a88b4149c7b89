/**
 * The SQS receiver against ElasticMQ (scripts/services/up.sh), with Postgres behind it: our SQS
 * relay sends to a FIFO queue, a consumer loop receives through the receiver. Each message is
 * deleted only after its transaction committed; a delete that is lost (the message comes back
 * after its visibility timeout) and a commit that fails (not deleted, received again) still leave
 * exactly one effect per message, in publish order per group.
 */
import * as sqs from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { Outboxer } from 'outboxer';
import { nodePostgres, type PgTransactionClient } from 'outboxer/pg';
import { sqsRelay, sqsReceiver, type SqsReceivedMessageLike } from 'outboxer/sqs';
import { postgresFixture } from '../support/databases.js';
import {
  clear,
  consumerOf,
  effects,
  pgRunner,
  recordEffect,
  type PostgresFixture,
  orderSteps,
  expectOncePerMessageInGroupOrder,
  expectStoredThenProcessed,
  storingConsumerOf,
} from './support.js';

const ENDPOINT = 'http://127.0.0.1:9324';

let fixture: PostgresFixture;
let consumer: Awaited<ReturnType<typeof consumerOf>>;
let runner: ReturnType<typeof pgRunner>;
const client = new sqs.SQSClient({
  endpoint: ENDPOINT,
  region: 'us-east-1',
  credentials: { accessKeyId: 'outboxer', secretAccessKey: 'outboxer' },
});
const queues: string[] = [];

beforeAll(async () => {
  fixture = await postgresFixture();
  consumer = await consumerOf(fixture, 'sqs');
});
afterAll(async () => {
  for (const QueueUrl of queues)
    await client.send(new sqs.DeleteQueueCommand({ QueueUrl })).catch(() => undefined);
  client.destroy();
  await consumer.outboxer.close();
  await fixture.close();
});
beforeEach(async () => {
  await clear(fixture);
  runner = pgRunner(fixture.pool);
});

/** A FIFO queue whose received messages come back after 1 s when they are not deleted. */
async function createQueue(): Promise<string> {
  const name = `outboxer-receiver-${Math.random().toString(36).slice(2, 10)}.fifo`;
  const { QueueUrl } = await client.send(
    new sqs.CreateQueueCommand({
      QueueName: name,
      Attributes: { FifoQueue: 'true', VisibilityTimeout: '1' },
    }),
  );
  queues.push(QueueUrl!);
  return QueueUrl!;
}

/** An application's loop: receive, pass each message to the receiver, until `done()`. */
async function consumeUntil(
  queueUrl: string,
  receive: (messages: SqsReceivedMessageLike[]) => Promise<Array<PromiseSettledResult<unknown>>>,
  done: (errors: unknown[]) => Promise<boolean> | boolean,
): Promise<unknown[]> {
  const errors: unknown[] = [];
  while (!(await done(errors))) {
    const { Messages = [] } = await client.send(
      new sqs.ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['All'],
      }),
    );
    for (const result of await receive(Messages))
      if (result.status === 'rejected') errors.push(result.reason);
  }
  return errors;
}

async function queueIsEmpty(queueUrl: string): Promise<boolean> {
  const { Attributes = {} } = await client.send(
    new sqs.GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['All'] }),
  );
  return (
    Number(Attributes.ApproximateNumberOfMessages) +
      Number(Attributes.ApproximateNumberOfMessagesNotVisible) ===
    0
  );
}

const published = orderSteps(6, 2);

test('each message is deleted after its commit only, and has one effect though received again', async () => {
  const queueUrl = await createQueue();
  const producer = new Outboxer({
    database: nodePostgres(fixture.pool),
    testing: 'manual',
    logger: false,
    outboxes: { orders: { table: 'sqs_outbox', relay: sqsRelay({ client, queueUrl, commands: sqs }) } },
  });
  await producer.migrate();
  const ids = (await fixture.transaction((tx) => producer.publishMany(tx, published))).map(String);
  expect((await producer.drain('orders')).pending).toBe(0);
  await producer.close();

  // What happened, in order: each commit of the receiver's transaction, each delete it sent.
  const events: string[] = [];
  const handling = new WeakMap<object, string>(); // the message a transaction's handler ran for
  const lostDelete = ids[0]!; // its first delete never reaches SQS
  const failedCommit = ids[3]!; // its first commit fails
  const receiptIds = new Map<string, string>();
  const recordingClient = {
    async send(command: unknown) {
      if (command instanceof sqs.DeleteMessageCommand) {
        const id = receiptIds.get(command.input.ReceiptHandle!)!;
        events.push(`delete ${id}`);
        if (id === lostDelete && events.filter((e) => e === `delete ${id}`).length === 1) return {};
      }
      return client.send(command as never);
    },
  };
  const receive = sqsReceiver({
    outboxer: consumer.outboxer,
    inbox: 'sqs',
    client: recordingClient,
    queueUrl,
    transaction: async (work) => {
      let client: object | undefined;
      // A pooled client keeps no label of its last transaction.
      const result = await runner.transaction((tx) => (handling.delete(tx), work((client = tx))));
      const id = handling.get(client!);
      if (id !== undefined) events.push(`commit ${id}`); // a duplicate runs no handler: nothing to label
      return result;
    },
    handler: async (message, tx) => {
      handling.set(tx, message.id);
      await recordEffect(tx, message.id, message.groupKey, message.payload);
      if (message.id === failedCommit && !events.includes(`failed ${failedCommit}`)) {
        events.push(`failed ${failedCommit}`);
        runner.failCommitOf(tx); // this transaction only: others run at the same time
      }
    },
  });
  const tracked = async (messages: SqsReceivedMessageLike[]) => {
    for (const message of messages)
      receiptIds.set(message.ReceiptHandle!, message.MessageAttributes!['outboxer-id']!.StringValue!);
    return receive(messages);
  };
  const errors = await consumeUntil(queueUrl, tracked, () => queueIsEmpty(queueUrl));
  // The failed commit; and the later messages of its group received with it, left in the queue.
  expect(String(errors[0])).toBe('Error: the commit failed');
  for (const error of errors.slice(1)) expect(error).toMatchObject({ code: 'INVALID_STATE' });

  const rows = await effects(fixture);
  expectOncePerMessageInGroupOrder(rows, ids, published);
  for (const id of ids) {
    const mine = events.filter((e) => e.endsWith(` ${id}`));
    // Never deleted before a commit; the failed commit was not followed by a delete.
    expect(mine.indexOf(`commit ${id}`), id).toBeGreaterThanOrEqual(0);
    expect(mine.indexOf(`delete ${id}`)).toBeGreaterThan(mine.indexOf(`commit ${id}`));
  }
  expect(events.filter((e) => e.endsWith(` ${failedCommit}`))).toEqual([
    `failed ${failedCommit}`,
    `commit ${failedCommit}`,
    `delete ${failedCommit}`,
  ]);
  // The message whose delete was lost came back, was recognised (no handler), and was deleted again.
  expect(events.filter((e) => e.endsWith(` ${lostDelete}`))).toEqual([
    `commit ${lostDelete}`,
    `delete ${lostDelete}`,
    `delete ${lostDelete}`,
  ]);
});

test('a message without outboxer attributes is refused and left in the queue, unless an id function names it', async () => {
  const queueUrl = await createQueue();
  const { MessageId } = await client.send(
    new sqs.SendMessageCommand({
      QueueUrl: queueUrl,
      MessageBody: '{"foreign":1}',
      MessageGroupId: 'g',
      MessageDeduplicationId: 'd',
    }),
  );
  const options = {
    outboxer: consumer.outboxer,
    inbox: 'sqs',
    client,
    queueUrl,
    commands: sqs,
    transaction: runner.transaction,
    handler: async (
      message: { id: string; groupKey: string | null; payload: unknown },
      tx: PgTransactionClient,
    ) => recordEffect(tx, message.id, message.groupKey, message.payload),
  };
  const refused = await consumeUntil(queueUrl, sqsReceiver(options), (errors) => errors.length > 0);
  expect(refused[0]).toMatchObject({ name: 'MissingMessageIdError', code: 'INVALID_MESSAGE' });
  expect(String(refused[0])).toContain("MessageAttributeNames: ['All']");
  expect(await queueIsEmpty(queueUrl)).toBe(false);
  expect(await effects(fixture)).toEqual([]);

  const named = sqsReceiver({ ...options, id: (message) => message.MessageId });
  expect(await consumeUntil(queueUrl, named, () => queueIsEmpty(queueUrl))).toEqual([]);
  expect(await effects(fixture)).toEqual([
    { message_id: MessageId, group_key: null, payload: { foreign: 1 } },
  ]);
});

test('store: true deletes each message once stored; the inbox processes them later, once each, in group order', async () => {
  const queueUrl = await createQueue();
  const producer = new Outboxer({
    database: nodePostgres(fixture.pool),
    testing: 'manual',
    logger: false,
    outboxes: { orders: { table: 'sqs_outbox', relay: sqsRelay({ client, queueUrl, commands: sqs }) } },
  });
  await producer.migrate();
  const ids = (await fixture.transaction((tx) => producer.publishMany(tx, published))).map(String);
  expect((await producer.drain('orders')).pending).toBe(0);
  await producer.close();

  const stored = await storingConsumerOf(fixture, runner, 'sqsStored');
  runner.failCommit = true; // the first store's commit fails: that message is not deleted
  const receive = sqsReceiver({
    outboxer: stored,
    inbox: 'sqsStored',
    client,
    queueUrl,
    commands: sqs,
    transaction: runner.transaction,
    store: true,
  });
  const errors = await consumeUntil(queueUrl, receive, () => queueIsEmpty(queueUrl));
  expect(String(errors[0])).toBe('Error: the commit failed');
  // The queue is empty: every message is stored, once; the inbox processes them once started.
  await expectStoredThenProcessed(fixture, stored, 'sqsStored', ids, published);
});
