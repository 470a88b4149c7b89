/**
 * Stream rows: NATS JetStream (127.0.0.1:4222, a file-stored stream), Redis Streams and BullMQ
 * (Redis 127.0.0.1:6379), each fresh per arm and deleted after it. JetStream: every message of a
 * batch published at once with its Nats-Msg-Id, every PubAck awaited. Redis Streams: one pipeline
 * of XADDs per batch. BullMQ: one `addBulk` per batch (the relay's `strictOrder` wave: a batch holds
 * one message per group key, so one call).
 */
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { bullmqRelay, defaultJobId } from 'outboxer/bullmq';
import { natsRelay } from 'outboxer/nats';
import { redisStreamsRelay } from 'outboxer/redis-streams';
import { BROKER_OUTBOX, randomSuffix, type BrokerTarget, type Destination } from './broker-destination.js';

const REDIS = { host: '127.0.0.1', port: 6379 };

interface NatsRecord {
  readonly msgID: string;
  readonly payload: string;
  readonly headers: Readonly<Record<string, string>>;
}

async function nats(): Promise<Destination<NatsRecord[]>> {
  const nc = await connect({ servers: '127.0.0.1:4222' });
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  const suffix = randomSuffix();
  const name = `OUTBOXER_BENCH_${suffix.toUpperCase()}`;
  const subject = `outboxer-bench.${suffix}.orders`;
  await jsm.streams.add({ name, subjects: [subject] });
  return {
    relay: () => natsRelay({ jetstream: js, createHeaders: headers, subject }),
    encode: (batch) =>
      batch.map((m) => ({
        msgID: `${BROKER_OUTBOX}-${m.id}`,
        payload: JSON.stringify(m.payload),
        headers: m.headers,
      })),
    async send(records) {
      await Promise.all(
        records.map((r) => {
          const h = headers();
          for (const [key, value] of Object.entries(r.headers)) h.set(key, value);
          return js.publish(subject, r.payload, { msgID: r.msgID, headers: h });
        }),
      );
    },
    async received() {
      return (await jsm.streams.info(name)).state.messages;
    },
    async close() {
      await jsm.streams.delete(name).catch(() => undefined);
      await nc.close();
    },
  };
}

async function redisStreams(): Promise<Destination<string[][]>> {
  const redis = new Redis(REDIS);
  const key = `outboxer-bench-${randomSuffix()}`;
  return {
    relay: () => redisStreamsRelay({ redis, stream: key }),
    encode: (batch) =>
      batch.map((m) => [
        'xadd',
        key,
        '*',
        'id',
        String(m.id),
        'outbox',
        BROKER_OUTBOX,
        'groupKey',
        m.groupKey,
        'payload',
        JSON.stringify(m.payload),
        'headers',
        JSON.stringify(m.headers),
      ]),
    async send(commands) {
      const replies = await redis.pipeline(commands).exec();
      if (replies?.some(([error]) => error !== null)) throw new Error('an XADD failed');
    },
    received: () => redis.xlen(key),
    async close() {
      await redis.del(key);
      await redis.quit();
    },
  };
}

async function bullmq(): Promise<
  Destination<Array<{ name: string; data: unknown; opts: { jobId: string } }>>
> {
  const queue = new Queue(`outboxer-bench-${randomSuffix()}`, { connection: REDIS });
  await queue.waitUntilReady();
  return {
    relay: () => bullmqRelay({ queue }),
    encode: (batch) =>
      batch.map((m) => ({
        name: BROKER_OUTBOX,
        data: { payload: m.payload, headers: m.headers },
        opts: { jobId: defaultJobId({ outbox: BROKER_OUTBOX, id: m.id }) },
      })),
    async send(jobs) {
      await queue.addBulk(jobs);
    },
    async received() {
      return (await queue.getJobCounts('waiting')).waiting ?? 0;
    },
    async close() {
      await queue.obliterate({ force: true }).catch(() => undefined);
      await queue.close();
    },
  };
}

export function streamTargets(): BrokerTarget[] {
  return [
    {
      what: 'NATS JetStream',
      limitLabel: 'js.publish of each message of a batch of 100 at once, every PubAck awaited, 4 loops',
      partitions: 4,
      batchSize: 100,
      settings:
        'a file-stored stream, one subject, Nats-Msg-Id set (deduplication), every PubAck awaited per batch',
      open: nats,
    },
    {
      what: 'Redis Streams',
      limitLabel: 'one pipeline of 100 XADDs per batch, 4 loops',
      partitions: 4,
      batchSize: 100,
      settings: 'one stream key, one ioredis client, every XADD reply read',
      open: redisStreams,
    },
    {
      what: 'BullMQ',
      limitLabel: 'Queue.addBulk of 100 jobs per batch, 4 loops',
      partitions: 4,
      batchSize: 100,
      settings:
        "one queue, jobs with the relay's job ids (`strictOrder`: one job per group key per call, here the whole batch)",
      open: bullmq,
    },
  ];
}
