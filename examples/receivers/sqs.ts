/**
 * The SQS receiver: one service relays order events to a FIFO queue, another receives them into
 * an inbox and ships each order step once, although the network drops its first delete, so SQS
 * delivers that message again. Both run in this process, on one database, so that the example is
 * self-contained.
 *
 * Needs PostgreSQL in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) and SQS in
 * SQS_ENDPOINT (default http://127.0.0.1:9324, ElasticMQ; in this repository:
 * `bash scripts/services/up.sh`).
 *
 *   npx tsx examples/receivers/sqs.ts
 */
import { pathToFileURL } from 'node:url';
import * as sqs from '@aws-sdk/client-sqs';
import pg from 'pg';
import { Outboxer, defineMessage } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { sqsReceiver, sqsRelay } from 'outboxer/sqs';

const OrderStep = defineMessage<{ orderId: number; step: string }>({
  outbox: 'orders',
  type: 'order.step',
  groupKey: (event) => `order:${event.orderId}`, // the FIFO MessageGroupId
});

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
): Promise<void> {
  const client = new sqs.SQSClient({
    endpoint: process.env.SQS_ENDPOINT ?? 'http://127.0.0.1:9324',
    region: 'us-east-1',
    credentials: { accessKeyId: 'example', secretAccessKey: 'example' },
  });
  // A message received and not deleted comes back after 1 s (the default is 30 s).
  const { QueueUrl: queueUrl } = await client.send(
    new sqs.CreateQueueCommand({
      QueueName: `outboxer-receiver-example-${Date.now()}.fifo`,
      Attributes: { FifoQueue: 'true', VisibilityTimeout: '1' },
    }),
  );
  const pool = new pg.Pool({ connectionString: databaseUrl });

  // The sending service: its outbox relays to the queue.
  const sender = new Outboxer({
    database: nodePostgres(pool),
    outboxes: { orders: { relay: sqsRelay({ client, queueUrl: queueUrl!, commands: sqs }) } },
  });
  // The receiving service: an inbox, and the receiver that feeds it. Its network drops the first
  // delete: SQS cannot know the message was handled.
  let deletes = 0;
  const flakyClient = {
    send: (command: unknown) => {
      if (command instanceof sqs.DeleteMessageCommand && ++deletes === 1)
        return Promise.reject(new Error('the network dropped the request'));
      return client.send(command as sqs.DeleteMessageCommand);
    },
  };
  const shipping = new Outboxer({ database: nodePostgres(pool), inboxes: { shipping: {} } });
  const receive = sqsReceiver({
    outboxer: shipping,
    inbox: 'shipping',
    client: flakyClient,
    queueUrl: queueUrl!,
    commands: sqs,
    transaction: (work) => inTransaction(pool, work), // the message is deleted after this commits
    handler: async (message, client) => {
      const { orderId, step } = message.payload as { orderId: number; step: string };
      await client.query('INSERT INTO shipments (order_id, step) VALUES ($1, $2)', [orderId, step]);
      console.log(`${message.groupKey} #${message.id} ${step}: shipped`);
    },
  });

  try {
    await pool.query('CREATE TABLE IF NOT EXISTS shipments (id serial PRIMARY KEY, order_id int, step text)');
    await sender.migrate();
    await shipping.migrate(); // creates the inbox table
    await sender.start();
    await inTransaction(pool, async (client) => {
      await sender.publish(client, OrderStep({ orderId: 1, step: 'placed' }));
      await sender.publish(client, OrderStep({ orderId: 1, step: 'paid' }));
    });
    while ((await sender.counts('orders')).pending > 0)
      await new Promise((resolve) => setTimeout(resolve, 50));

    let shipped = 0;
    while (shipped < 2) {
      const { Messages = [] } = await client.send(
        new sqs.ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 2,
          MessageAttributeNames: ['All'], // outboxer's id, group key and type
          MessageSystemAttributeNames: ['All'], // the MessageGroupId, which keeps a group in order
        }),
      );
      const results = await receive(Messages);
      results.forEach((result, i) => {
        const id = Messages[i]!.MessageAttributes?.['outboxer-id']?.StringValue;
        if (result.status === 'rejected') {
          const reason = (result.reason as Error).message.split(':')[0];
          console.log(`#${id}: not deleted (${reason}); SQS delivers it again`);
        } else {
          shipped += 1;
          if (result.value.duplicate) console.log(`#${id}: already handled, deleted`);
        }
      });
    }

    const { rows } = await pool.query<{ steps: string }>(
      "SELECT string_agg(step, ', ' ORDER BY id) AS steps FROM shipments WHERE order_id = 1",
    );
    console.log(`order 1 shipped steps: ${rows[0]!.steps}`);
  } finally {
    await sender.stop();
    await shipping.stop();
    await client.send(new sqs.DeleteQueueCommand({ QueueUrl: queueUrl })).catch(() => undefined);
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
