/**
 * What the chaos checker reads: the run directory's logs (the ids of the transactions rolled back
 * on purpose, the operator's decisions, the relays' events) and the destinations (the sink's
 * deliveries table, the Kafka topic).
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type pg from 'pg';
import { Kafka, logLevel } from 'kafkajs';
import { OPERATOR_LOG, type OperatorAction } from './config.js';

/** One arrival of a message at a destination. */
export interface Delivery {
  id: number;
  group: string | null;
  groupSeq: number;
  node: string;
  attempts: number;
  hash: string;
  at: number;
}

/** A relay's event the duplicates are attributed to (lease lost, error, batch aborted). */
export interface NodeEvent {
  t: number;
  node: string;
  kind: string;
}

export function readRolledBack(runDir: string): Set<number> {
  const ids = new Set<number>();
  for (const file of readdirSync(runDir).filter((f) => f.startsWith('rolledback-'))) {
    for (const line of readFileSync(join(runDir, file), 'utf8').split('\n')) {
      if (!line.trim()) continue;
      try {
        for (const id of JSON.parse(line) as number[]) ids.add(id);
      } catch {
        // A line cut by the SIGKILL that ended its publisher.
      }
    }
  }
  return ids;
}

export function readOperator(runDir: string): OperatorAction[] {
  const file = join(runDir, OPERATOR_LOG);
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim())
    .map((line) => JSON.parse(line) as OperatorAction);
}

export function readEvents(runDir: string): NodeEvent[] {
  const events: NodeEvent[] = [];
  for (const file of readdirSync(runDir).filter((f) => f.startsWith('events-'))) {
    for (const line of readFileSync(join(runDir, file), 'utf8').split('\n')) {
      if (!line.trim()) continue;
      try {
        const event = JSON.parse(line) as NodeEvent;
        if (event.kind === 'lease-lost' || event.kind === 'error' || event.kind === 'batch-aborted')
          events.push(event);
      } catch {
        // cut by SIGKILL
      }
    }
  }
  return events;
}

export async function readSinkDeliveries(sink: pg.Client): Promise<Map<string, Delivery[]>> {
  const byOutbox = new Map<string, Delivery[]>();
  let after = 0;
  for (;;) {
    const { rows } = await sink.query<{
      seq: string;
      outbox: string;
      message_id: string;
      group_key: string | null;
      group_seq: string;
      node: string;
      attempts: number;
      hash: string;
      at: number;
    }>(
      `SELECT seq, outbox, message_id, group_key, group_seq, node, attempts, hash, (extract(epoch FROM at) * 1000)::float8 AS at
       FROM deliveries WHERE seq > $1 ORDER BY seq LIMIT 50000`,
      [after],
    );
    if (rows.length === 0) break;
    for (const r of rows) {
      let list = byOutbox.get(r.outbox);
      if (list === undefined) byOutbox.set(r.outbox, (list = []));
      list.push({
        id: Number(r.message_id),
        group: r.group_key,
        groupSeq: Number(r.group_seq),
        node: r.node,
        attempts: r.attempts,
        hash: r.hash,
        at: Number(r.at),
      });
    }
    after = Number(rows[rows.length - 1]!.seq);
  }
  return byOutbox;
}

/** Reads the whole topic, partition by partition in offset order (a key lives in one partition). */
export async function readKafka(kafka: {
  brokers: string[];
  topic: string;
}): Promise<Map<string, Delivery[]>> {
  const client = new Kafka({ clientId: 'chaos-checker', brokers: kafka.brokers, logLevel: logLevel.NOTHING });
  const admin = client.admin();
  await admin.connect();
  const offsets = await admin.fetchTopicOffsets(kafka.topic);
  await admin.disconnect();
  const high = new Map(offsets.map((o) => [o.partition, Number(o.high)]));
  const perPartition = new Map<number, Delivery[]>();
  const remaining = new Set(offsets.filter((o) => Number(o.high) > Number(o.low)).map((o) => o.partition));
  const outboxOf = new Map<Delivery, string>();
  if (remaining.size > 0) {
    const consumer = client.consumer({ groupId: `chaos-checker-${Date.now()}`, maxWaitTimeInMs: 200 });
    await consumer.connect();
    await consumer.subscribe({ topic: kafka.topic, fromBeginning: true });
    let resolveDone: () => void = () => undefined;
    const done = new Promise<void>((resolve) => (resolveDone = resolve));
    await consumer.run({
      eachBatchAutoResolve: true,
      eachBatch: async ({ batch }) => {
        let list = perPartition.get(batch.partition);
        if (list === undefined) perPartition.set(batch.partition, (list = []));
        for (const message of batch.messages) {
          const value = JSON.parse(message.value!.toString()) as {
            id: number;
            outbox: string;
            group: string | null;
            seq: number;
            hash: string;
            node: string;
            attempts: number;
            at: number;
          };
          const delivery: Delivery = {
            id: value.id,
            group: value.group,
            groupSeq: value.seq,
            node: value.node,
            attempts: value.attempts,
            hash: value.hash,
            at: value.at,
          };
          outboxOf.set(delivery, value.outbox);
          list.push(delivery);
          if (Number(message.offset) + 1 >= high.get(batch.partition)!) remaining.delete(batch.partition);
        }
        if (remaining.size === 0) resolveDone();
      },
    });
    const timeout = setTimeout(resolveDone, 120_000);
    await done;
    clearTimeout(timeout);
    await consumer.disconnect();
  }
  const byOutbox = new Map<string, Delivery[]>();
  for (const partition of [...perPartition.keys()].sort((a, b) => a - b)) {
    for (const delivery of perPartition.get(partition)!) {
      const outbox = outboxOf.get(delivery)!;
      let list = byOutbox.get(outbox);
      if (list === undefined) byOutbox.set(outbox, (list = []));
      list.push(delivery);
    }
  }
  return byOutbox;
}
