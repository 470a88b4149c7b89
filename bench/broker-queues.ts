/**
 * Queue rows: SQS on the local server (ElasticMQ, 127.0.0.1:9324), a standard and a FIFO queue, and
 * RabbitMQ (127.0.0.1:5672) through a topic exchange into a durable queue, each fresh per arm and
 * deleted after it. SQS: SendMessageBatch calls of 10 entries, 4 at once (the relay's default
 * `concurrency`); a FIFO entry carries its group key as MessageGroupId and its id as
 * MessageDeduplicationId. RabbitMQ: persistent messages on a confirm channel, `mandatory`, the
 * batch published at once and every confirm awaited.
 */
import * as sqs from '@aws-sdk/client-sqs';
import amqp, { type ChannelModel, type ConfirmChannel } from 'amqplib';
import { rabbitmqRelay } from 'outboxer/rabbitmq';
import { sqsRelay, toSqsId, type SqsBatchEntry } from 'outboxer/sqs';
import {
  randomSuffix,
  type BenchMessage,
  type BrokerTarget,
  type Destination,
} from './broker-destination.js';

const SQS_ENDPOINT = 'http://127.0.0.1:9324';
const AMQP_URL = 'amqp://guest:guest@127.0.0.1:5672';
/** The SQS relay's default: calls of one batch in flight at once. */
const SQS_CONCURRENCY = 4;
const ENTRIES_PER_CALL = 10;

function sqsEntries(batch: readonly BenchMessage[], fifo: boolean): SqsBatchEntry[][] {
  const calls: SqsBatchEntry[][] = [];
  for (let i = 0; i < batch.length; i += ENTRIES_PER_CALL) {
    calls.push(
      batch.slice(i, i + ENTRIES_PER_CALL).map((m) => {
        const entry: SqsBatchEntry = {
          Id: String(m.id),
          MessageBody: JSON.stringify(m.payload),
          MessageAttributes: Object.fromEntries(
            Object.entries(m.headers).map(([name, value]) => [
              name,
              { DataType: 'String', StringValue: value },
            ]),
          ),
        };
        if (fifo) {
          entry.MessageGroupId = toSqsId(m.groupKey);
          entry.MessageDeduplicationId = String(m.id);
        }
        return entry;
      }),
    );
  }
  return calls;
}

async function sqsQueue(fifo: boolean): Promise<Destination<SqsBatchEntry[][]>> {
  const client = new sqs.SQSClient({
    endpoint: SQS_ENDPOINT,
    region: 'us-east-1',
    credentials: { accessKeyId: 'outboxer', secretAccessKey: 'outboxer' },
  });
  const name = `outboxer-bench-${randomSuffix()}${fifo ? '.fifo' : ''}`;
  const { QueueUrl } = await client.send(
    new sqs.CreateQueueCommand({ QueueName: name, Attributes: fifo ? { FifoQueue: 'true' } : {} }),
  );
  const queueUrl = QueueUrl!;
  const sendCall = async (entries: SqsBatchEntry[]): Promise<void> => {
    const output = await client.send(
      new sqs.SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: entries }),
    );
    if ((output.Failed ?? []).length > 0) throw new Error(`SQS refused ${output.Failed!.length} entries`);
  };
  return {
    relay: () => sqsRelay({ client, queueUrl, concurrency: SQS_CONCURRENCY }),
    encode: (batch) => sqsEntries(batch, fifo),
    async send(calls) {
      let next = 0;
      const worker = async (): Promise<void> => {
        while (next < calls.length) await sendCall(calls[next++]!);
      };
      await Promise.all(Array.from({ length: Math.min(SQS_CONCURRENCY, calls.length) }, worker));
    },
    async received() {
      const { Attributes } = await client.send(
        new sqs.GetQueueAttributesCommand({
          QueueUrl: queueUrl,
          AttributeNames: ['ApproximateNumberOfMessages'],
        }),
      );
      return Number(Attributes?.ApproximateNumberOfMessages ?? 0);
    },
    async close() {
      await client.send(new sqs.DeleteQueueCommand({ QueueUrl: queueUrl })).catch(() => undefined);
      client.destroy();
    },
  };
}

interface AmqpRecord {
  readonly routingKey: string;
  readonly content: Buffer;
  readonly properties: amqp.Options.Publish;
}

async function rabbitmq(): Promise<Destination<AmqpRecord[]>> {
  const connection: ChannelModel = await amqp.connect(AMQP_URL);
  const admin = await connection.createChannel();
  const exchange = `outboxer-bench-${randomSuffix()}`;
  await admin.assertExchange(exchange, 'topic', { durable: true });
  const { queue } = await admin.assertQueue(`${exchange}-q`, { durable: true });
  await admin.bindQueue(queue, exchange, '#');
  let channel: ConfirmChannel | undefined;
  return {
    relay: () => rabbitmqRelay({ connection, exchange }),
    encode: (batch) =>
      batch.map((m) => ({
        routingKey: m.groupKey,
        content: Buffer.from(JSON.stringify(m.payload), 'utf8'),
        properties: {
          messageId: String(m.id),
          persistent: true,
          contentType: 'application/json',
          timestamp: Math.floor(Date.now() / 1000),
          headers: m.headers,
          mandatory: true,
        },
      })),
    async send(records) {
      channel ??= await connection.createConfirmChannel();
      const open = channel;
      await Promise.all(
        records.map(
          (r) =>
            new Promise<void>((resolve, reject) => {
              open.publish(exchange, r.routingKey, r.content, r.properties, (error: unknown) =>
                error ? reject(error as Error) : resolve(),
              );
            }),
        ),
      );
    },
    async received() {
      return (await admin.checkQueue(queue)).messageCount;
    },
    async close() {
      await admin.deleteQueue(queue).catch(() => undefined);
      await admin.deleteExchange(exchange).catch(() => undefined);
      await connection.close();
    },
  };
}

export function queueTargets(): BrokerTarget[] {
  const sqsSettings = `SendMessageBatch calls of ${ENTRIES_PER_CALL} entries, ${SQS_CONCURRENCY} calls at once (the relay's default \`concurrency\`), every entry's result read`;
  return [
    {
      what: 'SQS, standard queue (ElasticMQ)',
      limitLabel: `SendMessageBatch (${ENTRIES_PER_CALL} entries), ${SQS_CONCURRENCY} at once per batch of 100, 4 loops`,
      partitions: 4,
      batchSize: 100,
      settings: sqsSettings,
      open: () => sqsQueue(false),
    },
    {
      what: 'SQS, FIFO queue (ElasticMQ)',
      limitLabel: `SendMessageBatch (${ENTRIES_PER_CALL} entries, group and deduplication ids), ${SQS_CONCURRENCY} at once per batch of 100, 4 loops`,
      partitions: 4,
      batchSize: 100,
      settings: `${sqsSettings}; MessageGroupId = the group key, MessageDeduplicationId = the id; a batch holds one message per group key (10,000 keys), so the relay sends it in one round`,
      open: () => sqsQueue(true),
    },
    {
      what: 'RabbitMQ',
      limitLabel: 'confirm channel: publish a batch of 100 persistent messages, await every confirm, 4 loops',
      partitions: 4,
      batchSize: 100,
      settings:
        'a durable topic exchange and a durable queue bound with `#`, persistent messages, `mandatory`, publisher confirms awaited per batch (one wave: a batch holds one message per group key)',
      open: rabbitmq,
    },
  ];
}
