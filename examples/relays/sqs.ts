/**
 * outboxer → Amazon SQS (FIFO queue), with the outbox in PostgreSQL through node-postgres (`pg`).
 *
 * Needs PostgreSQL 13 or newer in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)
 * and an SQS endpoint in SQS_ENDPOINT: by default ElasticMQ on http://127.0.0.1:9324 (in this
 * repository: `bash scripts/services/sqs.sh`), or real SQS (set SQS_ENDPOINT to nothing and give the
 * SDK AWS credentials and a region the usual way). It creates a table `orders` if there is none (the README's Quick start has the
 * same one) and outboxer's own tables.
 *
 *   npx tsx examples/relays/sqs.ts
 */
import { pathToFileURL } from 'node:url';
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteQueueCommand,
  ReceiveMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import pg from 'pg';
import { Outboxer, defineMessage } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
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

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
): Promise<void> {
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

  const pool = new pg.Pool({ connectionString: databaseUrl });
  const outboxer = new Outboxer({
    database: nodePostgres(pool),
    outboxes: { orders: { relay: sqsRelay({ client, queueUrl: queueUrl! }), pollInterval: 100 } },
  });
  try {
    // Your own table, here for the example.
    await pool.query('CREATE TABLE IF NOT EXISTS orders (id int PRIMARY KEY, status text)');
    await outboxer.migrate(); // or postgresSchemaSql() in your own migration tool
    await outboxer.start(); // checks the queue: RELAY_MISCONFIGURED if it does not exist

    // The business write and the message commit together, or neither does.
    await inTransaction(pool, async (client) => {
      await client.query(
        `INSERT INTO orders VALUES (1, 'placed') ON CONFLICT (id) DO UPDATE SET status = 'placed'`,
      );
      await outboxer.publish(client, OrderPlaced({ orderId: 1, total: 4200 }));
    });
    await inTransaction(pool, async (client) => {
      await client.query(`UPDATE orders SET status = 'paid' WHERE id = 1`);
      await outboxer.publish(client, OrderPaid({ orderId: 1 }));
    });

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
    await pool.end();
  }
}

/** Runs `work` in a transaction on a client of the pool: COMMIT if it returns, ROLLBACK if it throws. */
async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  } finally {
    client.release();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
