/**
 * The relay contract against ElasticMQ (scripts/services/sqs.sh), once for a FIFO queue (order and
 * deduplication by outbox id) and once for a standard queue (no order).
 *
 * Outage: the relay's client talks to ElasticMQ through a small TCP proxy in this process. Cutting
 * it (closing the listener and every open connection) looks to the SDK like SQS being unreachable,
 * the outage users actually meet; restoring it reopens the same port. Deleting and recreating the
 * queue would lose what is in it and reset FIFO deduplication, so it is covered separately in
 * sqs-relay-setup.test.ts.
 */
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteQueueCommand,
  ReceiveMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { sqsRelay } from 'outboxer/sqs';
import { tcpProxy } from '../support/tcp-proxy.js';
import {
  relayContract,
  type Destination,
  type Misconfiguration,
  type Received,
  type Refusal,
} from './contract.js';

const SQS_PORT = 9324;
const ENDPOINT = `http://127.0.0.1:${SQS_PORT}`;

function sqsClient(endpoint = ENDPOINT): SQSClient {
  return new SQSClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'outboxer', secretAccessKey: 'outboxer' },
  });
}

async function createQueue(client: SQSClient, fifo: boolean): Promise<string> {
  const name = `outboxer-${Math.random().toString(36).slice(2, 10)}${fifo ? '.fifo' : ''}`;
  const { QueueUrl } = await client.send(
    new CreateQueueCommand({ QueueName: name, Attributes: fifo ? { FifoQueue: 'true' } : {} }),
  );
  return QueueUrl!;
}

/** Receives (10 at a time, 1 s long polls) and deletes until the queue answers empty. */
async function receiveAll(client: SQSClient, queueUrl: string, into: Received[]): Promise<void> {
  for (;;) {
    const { Messages = [] } = await client.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['All'],
      }),
    );
    if (Messages.length === 0) return;
    for (const message of Messages) {
      const attributes = message.MessageAttributes ?? {};
      into.push({
        id: Number(attributes['outboxer-id']?.StringValue),
        groupKey: attributes['outboxer-group-key']?.StringValue ?? null,
        payload: JSON.parse(message.Body!),
        ...(message.Attributes?.MessageDeduplicationId === undefined
          ? {}
          : { dedupeId: message.Attributes.MessageDeduplicationId }),
      });
    }
    await client.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: Messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
      }),
    );
  }
}

async function destination(fifo: boolean): Promise<Destination> {
  const consumer = sqsClient();
  const queueUrl = await createQueue(consumer, fifo);
  const proxy = await tcpProxy(SQS_PORT);
  const client = sqsClient(`http://127.0.0.1:${proxy.port}`);
  const received: Received[] = [];
  return {
    relay: sqsRelay({ client, queueUrl }),
    async received() {
      await receiveAll(consumer, queueUrl, received);
      return received;
    },
    outage: { begin: proxy.cut, end: proxy.restore },
    async teardown() {
      client.destroy();
      await proxy.cut();
      await consumer.send(new DeleteQueueCommand({ QueueUrl: queueUrl }));
      consumer.destroy();
    },
  };
}

async function misconfigured(fifo: boolean): Promise<Misconfiguration> {
  const client = sqsClient();
  const queueUrl = `${ENDPOINT}/000000000000/outboxer-missing-${Math.random().toString(36).slice(2, 10)}${fifo ? '.fifo' : ''}`;
  return {
    relay: sqsRelay({ client, queueUrl }),
    error: /^RELAY_MISCONFIGURED: SQS queue http:\/\/\S+\/outboxer-missing-\S+ does not exist .*Create it/,
    teardown: async () => client.destroy(),
  };
}

/** SQS takes only the characters of XML 1.0 in a body: U+FFFE is refused, however often it is sent. */
async function refusal(fifo: boolean): Promise<Refusal> {
  const client = sqsClient();
  const queueUrl = await createQueue(client, fifo);
  return {
    relay: sqsRelay({ client, queueUrl }),
    message: { payload: { text: 'not XML \uFFFE' } },
    error: /^DELIVERY_FAILED: .*the body contains U\+FFFE/,
    async teardown() {
      await client.send(new DeleteQueueCommand({ QueueUrl: queueUrl }));
      client.destroy();
    },
  };
}

relayContract({
  name: 'sqs fifo',
  keepsOrder: true,
  dedupesById: true,
  destination: () => destination(true),
  misconfigured: () => misconfigured(true),
  refusal: () => refusal(true),
});

relayContract({
  name: 'sqs standard',
  keepsOrder: false,
  dedupesById: false,
  destination: () => destination(false),
  misconfigured: () => misconfigured(false),
  refusal: () => refusal(false),
});
