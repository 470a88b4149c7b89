/**
 * outboxer → Amazon SQS (FIFO queue), with SQLite (better-sqlite3) as the database.
 *
 * Needs an SQS endpoint: ElasticMQ on 127.0.0.1:9324 (`bash scripts/services/sqs.sh`), or real SQS
 * (set SQS_ENDPOINT to nothing and give the SDK AWS credentials and a region the usual way).
 *
 *   npx tsx examples/relays/sqs.ts
 */
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteQueueCommand,
  ReceiveMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { Outboxer, defineMessage } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { sqsRelay } from 'outboxer/sqs';

const OrderPlaced = defineMessage<{ orderId: number; total: number }>({
  outbox: 'orders',
  type: 'OrderPlaced',
  groupKey: (order) => `order:${order.orderId}`, // the FIFO MessageGroupId: in order per order
});
const OrderPaid = defineMessage<{ orderId: number }>({
  outbox: 'orders',
  type: 'OrderPaid',
  groupKey: (order) => `order:${order.orderId}`,
});

export async function main(): Promise<void> {
  const endpoint = process.env.SQS_ENDPOINT ?? 'http://127.0.0.1:9324';
  // ElasticMQ takes any credentials; against AWS leave endpoint and credentials to the SDK's defaults.
  const client = endpoint
    ? new SQSClient({
        endpoint,
        region: 'us-east-1',
        credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      })
    : new SQSClient({});
  // A fresh queue per run: outbox ids restart at 1 in a new database, and a FIFO queue drops a
  // MessageDeduplicationId it saw in the last 5 minutes.
  const { QueueUrl: queueUrl } = await client.send(
    new CreateQueueCommand({
      QueueName: `outboxer-example-${Date.now()}.fifo`,
      Attributes: { FifoQueue: 'true' },
    }),
  );

  const db = new Database(':memory:');
  db.exec(
    'CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL, paid INTEGER NOT NULL DEFAULT 0)',
  );
  const outboxer = new Outboxer({
    database: betterSqlite3(db),
    outboxes: { orders: { relay: sqsRelay({ client, queueUrl: queueUrl! }), pollInterval: 100 } },
  });
  try {
    await outboxer.migrate();
    await outboxer.start(); // checks the queue: RELAY_MISCONFIGURED if it does not exist

    // The business write and the message commit together, or neither does.
    db.transaction(() => {
      db.prepare('INSERT INTO orders (id, total) VALUES (?, ?)').run(1, 4200);
      outboxer.publish(db, OrderPlaced({ orderId: 1, total: 4200 }));
    })();
    db.transaction(() => {
      db.prepare('UPDATE orders SET paid = 1 WHERE id = ?').run(1);
      outboxer.publish(db, OrderPaid({ orderId: 1 }));
    })();

    while ((await outboxer.counts('orders')).pending > 0)
      await new Promise((resolve) => setTimeout(resolve, 50));
    await outboxer.stop();

    // A consumer: MessageAttributes carry outboxer-id (deduplicate on it), -type and -group-key.
    const { Messages = [] } = await client.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageAttributeNames: ['All'],
      }),
    );
    for (const message of Messages) {
      const attributes = message.MessageAttributes ?? {};
      console.log(
        `${attributes['outboxer-group-key']?.StringValue} #${attributes['outboxer-id']?.StringValue} ${attributes['outboxer-type']?.StringValue} ${message.Body}`,
      );
    }
    if (Messages.length > 0) {
      await client.send(
        new DeleteMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: Messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
        }),
      );
    }
  } finally {
    await outboxer.stop();
    await client.send(new DeleteQueueCommand({ QueueUrl: queueUrl })).catch(() => undefined);
    client.destroy();
    db.close();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
