/**
 * Broker rows (`BENCH_ONLY=brokers`): outboxer relaying a backlog from a Postgres outbox into a real
 * broker, beside the same client library sending the same records from memory, with the same
 * batching and the same delivery guarantees, into a fresh destination of the same broker (the
 * broker's own limit, as this machine runs it). Each arm gets its own topic, queue or stream,
 * deleted after it; the arms alternate trial by trial and the judged ratio is the median of the
 * per-trial ratios, as in the relay rows.
 */
import { Outboxer, type Relay } from 'outboxer';
import { judge, addRow, type BenchContext } from './context.js';
import { benchMessages, BROKER_OUTBOX, type BrokerTarget, type Destination } from './broker-destination.js';
import { kafkaTargets } from './broker-kafka.js';
import { queueTargets } from './broker-queues.js';
import { streamTargets } from './broker-streams.js';
import { webhookTargets } from './broker-webhook.js';
import type { PostgresBench } from './postgres.js';
import { percent } from './report.js';
import { cpuMeter, describeCpu, median, rows, type CpuUse } from './support.js';

const TABLE = 'bench_broker';
const GROUPS = 10_000;
/** The target of every row: the relay at this share of what the client alone reaches. */
const TARGET = 0.7;

interface Arm {
  readonly rate: number;
  readonly cpu: CpuUse;
  /**
   * outboxer only: the share of the run each partition spent inside the relay's `deliver` (sending
   * and awaiting the broker), the rest waiting for its poll and acknowledgement: tells a row held
   * back by the broker from one held back by the database.
   */
  readonly inRelay?: number;
}

/** Counts what the relay reports delivered, and resolves once `count` are. */
function countingRelay(
  inner: Relay,
  count: number,
): { relay: Relay; finished: Promise<void>; busyMs: () => number } {
  let delivered = 0;
  let busy = 0;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const relay: Relay = {
    name: inner.name ?? 'relay',
    start: inner.start?.bind(inner),
    stop: inner.stop?.bind(inner),
    async deliver(batch, context) {
      const started = performance.now();
      const outcomes = await inner.deliver(batch, context);
      busy += performance.now() - started;
      delivered += outcomes ? outcomes.filter((o) => o.ok).length : batch.length;
      if (delivered >= count) done();
      return outcomes;
    },
  };
  return { relay, finished, busyMs: () => busy };
}

async function check(destination: Destination, count: number, arm: string): Promise<void> {
  const received = await destination.received();
  if (received < count) throw new Error(`${arm}: the destination holds ${received} of ${count} messages`);
}

/** outboxer: a backlog of `count` rows in `target.partitions` partitions, relayed until all are delivered. */
export async function relayArm(
  ctx: BenchContext<PostgresBench>,
  target: BrokerTarget,
  count: number,
): Promise<Arm> {
  const { db } = ctx;
  await db.dropTables(TABLE);
  const destination = await target.open();
  try {
    const { relay, finished, busyMs } = countingRelay(destination.relay(), count);
    const outboxer = new Outboxer({
      database: db.adapter(),
      outboxes: {
        [BROKER_OUTBOX]: { table: TABLE, partitions: target.partitions, batchSize: target.batchSize, relay },
      },
    });
    await outboxer.migrate();
    await db.fill({
      table: TABLE,
      outbox: BROKER_OUTBOX,
      count,
      groups: GROUPS,
      partitions: target.partitions,
    });
    await db.vacuum(TABLE);
    const cpu = cpuMeter();
    const started = performance.now();
    await outboxer.start();
    await finished;
    await outboxer.stop(); // the last batch is settled before stop() returns
    const elapsed = (performance.now() - started) / 1000;
    const use = cpu.stop();
    const [left] = await db.query(`SELECT count(*) AS n FROM "${TABLE}" WHERE status < 3`);
    if (Number(left?.n) !== 0) throw new Error(`the relay left ${String(left?.n)} messages pending`);
    await check(destination, count, 'outboxer');
    return { rate: count / elapsed, cpu: use, inRelay: busyMs() / 1000 / (elapsed * target.partitions) };
  } finally {
    await destination.close();
    await db.dropTables(TABLE);
  }
}

/** The client alone: the same records from memory, in batches of `batchSize`, one loop per partition. */
export async function plainArm(target: BrokerTarget, count: number): Promise<Arm> {
  const destination = await target.open();
  try {
    const loops = target.serialSends ? 1 : target.partitions;
    const messages = benchMessages(count, GROUPS);
    // Loop i takes every loops-th batch: the same batches as outboxer's partitions would hold.
    const batches: unknown[][] = Array.from({ length: loops }, () => []);
    for (let start = 0, i = 0; start < count; start += target.batchSize, i += 1)
      batches[i % loops]!.push(destination.encode(messages.slice(start, start + target.batchSize)));
    const cpu = cpuMeter();
    const started = performance.now();
    await Promise.all(
      batches.map(async (loop) => {
        for (const records of loop) await destination.send(records);
      }),
    );
    const elapsed = (performance.now() - started) / 1000;
    const use = cpu.stop();
    await check(destination, count, 'plain client');
    return { rate: count / elapsed, cpu: use };
  } finally {
    await destination.close();
  }
}

/**
 * The same row with a relay that only counts, on the same broker's fresh destination (left
 * empty): the pace of the database side alone, polls and acknowledgements at this row's partitions
 * and batch size, in the same trials.
 */
function databaseSide(target: BrokerTarget, count: number): BrokerTarget {
  return {
    ...target,
    async open() {
      const destination = await target.open();
      return {
        ...destination,
        relay: () => ({ name: 'count', deliver: async () => undefined }),
        received: async () => count,
      };
    },
  };
}

/** Every destination of the group, in the order of the report. */
export function brokerTargets(): BrokerTarget[] {
  return [...kafkaTargets(), ...queueTargets(), ...streamTargets(), ...webhookTargets()];
}

export async function brokerRows(ctx: BenchContext<PostgresBench>): Promise<void> {
  const { settings } = ctx;
  const count = rows(settings, 100_000, 600);
  const trials = settings.quick ? 1 : 3;
  const failed: string[] = [];
  const chosen = brokerTargets().filter(
    (t) =>
      settings.brokers === undefined || settings.brokers.some((name) => t.what.toLowerCase().includes(name)),
  );
  for (const target of chosen) {
    const what = `Relay into ${target.what}`;
    const ours: Arm[] = [];
    const plain: Arm[] = [];
    const database: Arm[] = [];
    try {
      for (let trial = 0; trial < trials; trial += 1) {
        // The first arm alternates: a slow start of the broker or the machine falls on both.
        const arms = [
          async () => plain.push(await plainArm(target, count)),
          async () => ours.push(await relayArm(ctx, target, count)),
        ];
        // Last in every trial: a reference, not one of the two arms compared.
        const reference = async () => database.push(await relayArm(ctx, databaseSide(target, count), count));
        if (trial % 2 === 1) arms.reverse();
        for (const arm of [...arms, reference]) await arm();
      }
    } catch (error) {
      addRow(ctx, { group: 'Brokers', what, skipped: `failed: ${String(error)}` });
      console.error(error);
      failed.push(target.what);
      continue;
    }
    const ratios = ours.map((arm, i) => arm.rate / plain[i]!.rate);
    const ratio = median(ratios);
    addRow(ctx, {
      group: 'Brokers',
      what,
      ours: { value: median(ours.map((a) => a.rate)), unit: 'msg/s' },
      limit: {
        label: target.limitLabel,
        figure: { value: median(plain.map((a) => a.rate)), unit: 'msg/s' },
      },
      ofLimit: percent(ratio),
      target: {
        text: `≥ ${percent(TARGET)} of the client alone`,
        measured: percent(ratio),
        met: judge(ctx, ratio >= TARGET),
      },
      note: `${count.toLocaleString('en-US')} messages per arm, ${target.partitions} partition${target.partitions > 1 ? 's' : ''}, \`batchSize: ${target.batchSize}\`; ${target.settings}. ${trials} alternating trials, medians (per-trial ratios ${ratios.map(percent).join(', ')}); the database side alone (the same outbox, partitions and batches, a relay that only counts) ${Math.round(median(database.map((a) => a.rate))).toLocaleString('en-US')} msg/s; time each partition spent in the relay's \`deliver\` (the rest waiting for its poll and acknowledgement) ${ours.map((a) => percent(a.inRelay ?? 0)).join(', ')}; CPU during the last trial: outboxer ${describeCpu(ours.at(-1)!.cpu)}; client alone ${describeCpu(plain.at(-1)!.cpu)}.`,
    });
  }
  // The other rows ran; the run still exits non-zero.
  if (failed.length > 0) throw new Error(`broker rows failed: ${failed.join(', ')}`);
}
