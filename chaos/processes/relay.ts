/**
 * A relay node of the chaos run: one outboxer instance relaying every outbox of the run.
 *
 * - Table outboxes go to `deliveries` in the sink database, reached through the fault proxy, in
 *   chunks of 10 rows per INSERT (each its own commit), so that a kill lands between two writes of
 *   a batch. The destination rejects a message's first `failTimes` attempts and always rejects
 *   poison messages, with long error texts carrying a connection string with a password (the
 *   engine must truncate and redact them).
 * - The Kafka outbox goes to a topic through a kafkajs producer (idempotent, acks=all).
 * - The broker outbox (`CHAOS_BROKER`) goes to the run's own broker through outboxer's Kafka or
 *   RabbitMQ relay (broker-relay.ts).
 *
 * Telemetry (lease lost, round errors, aborted batches, dead messages) is appended to
 * `events-<label>.jsonl` for the checker. SIGTERM stops it gracefully and reports how long stop()
 * took. The harness can ask it to SIGKILL itself in the middle of its next batch.
 * Usage: relay.ts <label>
 */
import { appendFileSync } from 'node:fs';
import diagnostics from 'node:diagnostics_channel';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Kafka, logLevel, type Producer } from 'kafkajs';
import pg from 'pg';
import {
  Outboxer,
  PermanentError,
  SKIPPED,
  batchRelay,
  type DeliveryOutcome,
  type Envelope,
  type Relay,
} from 'outboxer';
import {
  INSTANCE_NAME,
  LEASE_TIMEOUT,
  MAX_ERROR_LENGTH,
  SHUTDOWN_TIMEOUT,
  activeModes,
  childEnvironment,
  contentOf,
  outboxOptions,
  type ChaosPayload,
  type ControlMessage,
} from '../config.js';
import { brokerRelay } from '../broker-relay.js';
import { chaosDatabase } from '../database.js';
import { sleep } from '../random.js';

const [label] = process.argv.slice(2) as [string];
const env = childEnvironment();
const database = chaosDatabase(env.db);
const modes = activeModes(env.kafka !== null, database.notifications, env.broker?.kind);
const eventsFile = join(env.runDir, `events-${label}.jsonl`);
const record = (event: Record<string, unknown>): void =>
  appendFileSync(eventsFile, JSON.stringify({ t: Date.now(), node: label, ...event }) + '\n');

const CHUNK = 10;
/** A long destination error with a secret in a connection string: lastError must cut and redact it. */
const SECRET = 's3cr3t-chaos-password';
const longError = (what: string): string =>
  `${what}: upstream postgres://sink_user:${SECRET}@127.0.0.1:5/sink refused it. ` + 'detail '.repeat(400);

// On Postgres, a workaround for the engine bug described in docs/reliability.md ("a relay process
// crashes when its connection is cut inside a settle"): a client that the adapter checked out of
// the pool has no 'error' listener, so a connection that dies between two statements of a
// transaction raises an unhandled 'error' event. CHAOS_NO_WORKAROUND=1 leaves it out, to see the crash.
const appPool = database.pool(env.appUrl, {
  max: 16,
  name: `relay-${label}`,
  bare: process.env.CHAOS_NO_WORKAROUND === '1',
});
const sinkPool = new pg.Pool({
  connectionString: env.sinkUrl,
  max: 12,
  connectionTimeoutMillis: 3000,
  application_name: `chaos-relay-${label}`,
});
sinkPool.on('error', () => undefined);

let killMidBatch: number | undefined;
let kafkaMode: { mode: 'up' | 'down' | 'slow'; delayMs: number } = { mode: 'up', delayMs: 0 };
process.on('message', (message: ControlMessage) => {
  if (message.type === 'kill' && message.when === 'mid-batch') killMidBatch = Date.now();
  if (message.type === 'destination') kafkaMode = { mode: message.mode, delayMs: message.delayMs ?? 0 };
});

function maybeDieMidBatch(chunksLeft: number): void {
  if (killMidBatch === undefined) return;
  // Prefer a batch with writes still to come; after two seconds, any batch written but not settled.
  if (chunksLeft > 0 || Date.now() - killMidBatch > 2000) {
    record({ kind: 'self-kill', chunksLeft });
    process.kill(process.pid, 'SIGKILL');
  }
}

const hash = (text: string): string => createHash('sha1').update(text).digest('hex').slice(0, 16);

function sinkRelay(): Relay {
  return batchRelay(
    async (batch, context) => {
      const outcomes: Array<DeliveryOutcome | undefined> = batch.map(() => undefined);
      const failedGroups = new Set<string>();
      const send: number[] = [];
      batch.forEach((message, i) => {
        const payload = message.payload as ChaosPayload;
        if (message.groupKey !== null && failedGroups.has(message.groupKey)) {
          outcomes[i] = { ok: false, error: SKIPPED };
          return;
        }
        let error: Error | undefined;
        if (payload.poison) {
          error =
            message.id % 2 === 0
              ? new PermanentError(longError('poison message'))
              : new Error(longError('poison message'));
        } else if ((payload.failTimes ?? 0) > message.attempts) {
          error = new Error(longError(`flaky message, attempt ${message.attempts + 1}`));
        }
        if (error !== undefined) {
          outcomes[i] = { ok: false, error };
          if (message.groupKey !== null) failedGroups.add(message.groupKey);
          return;
        }
        send.push(i);
      });
      const chunks: number[][] = [];
      for (let i = 0; i < send.length; i += CHUNK) chunks.push(send.slice(i, i + CHUNK));
      for (let c = 0; c < chunks.length; c += 1) {
        const chunk = chunks[c]!;
        if (context.signal.aborted) {
          for (const i of chunks.slice(c).flat()) outcomes[i] = { ok: false, error: SKIPPED };
          break;
        }
        const messages = chunk.map((i) => batch[i]!);
        try {
          await insertDeliveries(messages);
          for (const i of chunk) outcomes[i] = { ok: true };
        } catch (error) {
          // Nothing after this point is sent: the destination is failing.
          for (const i of chunks.slice(c).flat()) outcomes[i] = { ok: false, error };
          break;
        }
        maybeDieMidBatch(chunks.length - c - 1);
      }
      return outcomes.map((o) => o ?? { ok: false, error: SKIPPED });
    },
    { name: 'sink-table' },
  );
}

async function insertDeliveries(messages: readonly Envelope[]): Promise<void> {
  await sinkPool.query(
    `INSERT INTO deliveries (outbox, message_id, group_key, group_seq, node, attempts, hash)
     SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::int[], $7::text[])`,
    [
      messages.map((m) => m.outbox),
      messages.map((m) => m.id),
      messages.map((m) => m.groupKey),
      messages.map((m) => (m.payload as ChaosPayload).seq),
      messages.map(() => label),
      messages.map((m) => m.attempts),
      messages.map((m) => hash(contentOf(m.payload, m.headers))),
    ],
  );
}

function kafkaRelay(brokers: string[], topic: string): Relay {
  let producer: Producer | undefined;
  return {
    name: 'kafka',
    async start() {
      const kafka = new Kafka({
        clientId: `chaos-${label}`,
        brokers,
        logLevel: logLevel.NOTHING,
        retry: { retries: 3, initialRetryTime: 100 },
      });
      producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
      await producer.connect();
    },
    async stop() {
      await producer?.disconnect();
    },
    async deliver(batch) {
      // The shared broker cannot be stopped: its outages are simulated here, at the client.
      if (kafkaMode.mode === 'down') throw new Error('simulated: Kafka unreachable');
      if (kafkaMode.mode === 'slow') await sleep(kafkaMode.delayMs);
      await producer!.send({
        topic,
        acks: -1,
        messages: batch.map((m) => ({
          key: m.groupKey,
          value: JSON.stringify({
            id: m.id,
            outbox: m.outbox,
            group: m.groupKey,
            seq: (m.payload as ChaosPayload).seq,
            hash: hash(contentOf(m.payload, m.headers)),
            node: label,
            attempts: m.attempts,
            at: Date.now(),
          }),
          headers: { 'outboxer-id': String(m.id) },
        })),
      });
      maybeDieMidBatch(0);
    },
  };
}

const broker = env.broker === null ? undefined : brokerRelay(env.broker, label);
const relayOf = (destination: string): Relay =>
  destination === 'kafka'
    ? kafkaRelay(env.kafka!.brokers, env.kafka!.topic)
    : destination === 'broker'
      ? broker!.relay
      : sinkRelay();

const outboxer = new Outboxer({
  database: appPool.adapter,
  name: INSTANCE_NAME,
  leaseTimeout: LEASE_TIMEOUT,
  shutdownTimeout: SHUTDOWN_TIMEOUT,
  maxErrorLength: MAX_ERROR_LENGTH,
  logger: {
    debug: () => undefined,
    info: () => undefined,
    warn: (message: string, meta?: unknown) => record({ kind: 'log', level: 'warn', message, meta }),
    error: (message: string, meta?: unknown) => record({ kind: 'log', level: 'error', message, meta }),
  },
  outboxes: Object.fromEntries(
    modes.map((mode) => [
      mode.name,
      {
        ...outboxOptions(mode),
        relay: relayOf(mode.destination),
      },
    ]),
  ),
});

diagnostics.subscribe('outboxer:lease:lost', (m) => record({ kind: 'lease-lost', ...(m as object) }));
diagnostics.subscribe('outboxer:lease:acquired', (m) => record({ kind: 'lease-acquired', ...(m as object) }));
diagnostics.subscribe('outboxer:error', (m) => {
  const { error, ...rest } = m as { error: unknown };
  record({ kind: 'error', ...rest, error: String(error).slice(0, 300) });
});
diagnostics.subscribe('outboxer:batch:stop', (m) => {
  if ((m as { aborted?: boolean }).aborted) record({ kind: 'batch-aborted', ...(m as object) });
});
diagnostics.subscribe('outboxer:message:dead', (m) => {
  const { error, ...rest } = m as { error: string };
  record({ kind: 'dead', ...rest, errorLength: error.length, leaked: error.includes(SECRET) });
});

const loop = monitorEventLoopDelay({ resolution: 10 });
loop.enable();

// The harness is gone (killed itself): do not outlive it.
process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => {
  const started = Date.now();
  void outboxer
    .stop()
    .then(async () => {
      const stopMs = Date.now() - started;
      await Promise.all([appPool.end(), sinkPool.end(), broker?.close()]).catch(() => undefined);
      const summary = { stopMs, loopMaxMs: loop.max / 1e6, loopP99Ms: loop.percentile(99) / 1e6 };
      record({ kind: 'stopped', ...summary });
      process.stdout.write(JSON.stringify(summary) + '\n');
      process.exit(0);
    })
    .catch((error: unknown) => {
      record({ kind: 'stop-failed', error: String(error) });
      process.exit(1);
    });
});

try {
  await outboxer.start();
} catch (error) {
  // The database or the broker was down at start: exit, and let the harness start another one.
  record({ kind: 'start-failed', error: String(error).slice(0, 300) });
  process.exit(3);
}
record({ kind: 'started' });
process.stdout.write('ready\n');
