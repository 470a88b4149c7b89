/**
 * A consumer of the inbox's chaos run (`CHAOS_BROKER`): reads the run's broker with outboxer's
 * receiver (kafkajsReceiver in a consumer group, or rabbitmqReceiver on its own queue), and handles
 * each message through the inbox in the consumer's database, writing one row into `effects` in the
 * same transaction. A second effect of a message is never thrown away silently: the unique key
 * turns it into a row of `double_effects`, which the checker counts as a violation.
 *
 * Duplicates the inbox absorbed and late messages it reported (its telemetry) are appended to
 * `inbox-<label>.jsonl`. The harness may ask it to SIGKILL itself right after its next COMMIT,
 * before the broker hears the acknowledgement; SIGTERM stops it gracefully. It exits with 3 when
 * it lost its broker (paused, restarting), and the harness starts another.
 * Usage: consumer.ts <label> <index>
 */
import { createHash } from 'node:crypto';
import diagnostics from 'node:diagnostics_channel';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import amqp from 'amqplib';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { Outboxer, type InboxOrder } from 'outboxer';
import { kafkajsReceiver } from 'outboxer/kafka';
import { nodePostgres } from 'outboxer/pg';
import { rabbitmqReceiver } from 'outboxer/rabbitmq';
import { INBOX_NAME } from '../broker.js';
import { childEnvironment, contentOf, type ChaosPayload, type ControlMessage } from '../config.js';

const [label, indexText] = process.argv.slice(2) as [string, string];
const env = childEnvironment();
const broker = env.broker!;
const eventsFile = join(env.runDir, `inbox-${label}.jsonl`);
const record = (event: Record<string, unknown>): void =>
  appendFileSync(eventsFile, JSON.stringify({ t: Date.now(), node: label, ...event }) + '\n');

const pool = new pg.Pool({ connectionString: broker.consumerUrl, max: 8, connectionTimeoutMillis: 5000 });
pool.on('error', () => undefined);
// A checked-out client whose connection dies between two statements must fail its query, not the process.
pool.on('connect', (client) => client.on('error', () => undefined));
const outboxer = new Outboxer({ database: nodePostgres(pool), inboxes: { [INBOX_NAME]: {} } });

diagnostics.subscribe('outboxer:inbox:duplicate', (m) => {
  const { id } = m as { id: string };
  record({ kind: 'duplicate', id });
});
diagnostics.subscribe('outboxer:inbox:out-of-order', (m) => {
  const { id, groupKey, after } = m as { id: string; groupKey: string; after?: string };
  record({ kind: 'out-of-order', id, groupKey, after });
});

let killAfterCommit = false;
process.on('message', (message: ControlMessage) => {
  if (message.type === 'kill' && message.when === 'after-commit') killAfterCommit = true;
});

/** BEGIN, work(client), COMMIT; ROLLBACK when it throws. The receiver acknowledges after this. */
async function inTransaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    const value = await work(client);
    await client.query('COMMIT');
    if (killAfterCommit) process.kill(process.pid, 'SIGKILL');
    return value;
  } catch (error) {
    broken = error as Error;
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release(broken);
  }
}

const hash = (text: string): string => createHash('sha1').update(text).digest('hex').slice(0, 16);

interface Received {
  id: string;
  source: string;
  groupKey: string | null | undefined;
  headers: Readonly<Record<string, string>>;
  payload: unknown;
}

async function handler(message: Received, client: pg.PoolClient, order: InboxOrder): Promise<void> {
  const payload = message.payload as ChaosPayload;
  const h = message.headers;
  // The publisher's own headers, in the order it set them: what its hash covered.
  const own: Record<string, string> = { 'x-publisher': h['x-publisher']!, 'x-index': h['x-index']! };
  if (h['x-unicode'] !== undefined) own['x-unicode'] = h['x-unicode'];
  const { rowCount } = await client.query(
    `INSERT INTO effects (message_id, source, group_key, group_seq, hash, consumer, out_of_order)
     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (message_id) DO NOTHING`,
    [
      message.id,
      message.source,
      message.groupKey ?? null,
      payload.seq,
      hash(contentOf(payload, own)),
      label,
      order.outOfOrder,
    ],
  );
  if (rowCount === 0)
    await client.query('INSERT INTO double_effects (message_id, consumer) VALUES ($1, $2)', [
      message.id,
      label,
    ]);
}

const receiverOptions = {
  outboxer,
  inbox: INBOX_NAME,
  transaction: inTransaction,
  handler,
};

let stop: () => Promise<void>;
const lost = (why: string): never => {
  record({ kind: 'broker-lost', why });
  process.exit(3);
};

try {
  if (broker.kind === 'kafka') {
    const kafka = new Kafka({
      clientId: `chaos-${label}`,
      brokers: [broker.url],
      logLevel: logLevel.NOTHING,
      retry: { retries: 5, initialRetryTime: 200 },
    });
    const consumer = kafka.consumer({
      groupId: 'chaos-inbox',
      sessionTimeout: 10_000,
      rebalanceTimeout: 20_000,
      heartbeatInterval: 1000,
      maxWaitTimeInMs: 200,
    });
    consumer.on(consumer.events.CRASH, (event) => {
      const { error, restart } = event.payload as { error: Error; restart: boolean };
      record({ kind: 'consumer-crash', error: String(error).slice(0, 300), restart });
      if (!restart) lost(String(error));
    });
    await consumer.connect();
    await consumer.subscribe({ topic: broker.destination, fromBeginning: true });
    await consumer.run({
      autoCommitInterval: 1000,
      partitionsConsumedConcurrently: 4,
      eachMessage: kafkajsReceiver(receiverOptions),
    });
    stop = () => consumer.disconnect();
  } else {
    const queue = broker.queues[Number(indexText) % broker.queues.length]!;
    const connection = await amqp.connect(broker.url);
    connection.on('error', () => undefined);
    connection.on('close', () => lost('connection closed'));
    const channel = await connection.createChannel();
    channel.on('error', () => undefined);
    await channel.prefetch(20);
    await channel.consume(queue, rabbitmqReceiver({ ...receiverOptions, channel }));
    stop = async () => {
      connection.removeAllListeners('close');
      await connection.close();
    };
  }
} catch (error) {
  lost(String(error).slice(0, 300));
}

process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => {
  void stop()
    .catch(() => undefined)
    .then(() => pool.end())
    .catch(() => undefined)
    .then(() => {
      record({ kind: 'stopped' });
      process.exit(0);
    });
});
record({ kind: 'started' });
process.stdout.write('ready\n');
