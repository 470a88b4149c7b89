/**
 * The checker of a chaos run. It compares what was committed (the `published` table, written in
 * the same transactions as the messages, and the ids of the transactions rolled back on purpose)
 * with what the destinations recorded (the `deliveries` table of the sink database, and the Kafka
 * topic), and with what is left in the outbox table, and reports per outbox:
 *
 * - committed, delivered (distinct committed ids that arrived), lost (committed, neither delivered
 *   nor dead nor discarded by the operator: must be 0), phantom (delivered but never committed: must be 0), delivered from
 *   rolled-back transactions (must be 0);
 * - per-group order violations among first deliveries, by id and by the group's commit sequence
 *   (must be 0); content corrupted on the way (must be 0);
 * - duplicates, each attributed to the fault that caused it;
 * - dead messages (only where maxAttempts is finite; any in a strict outbox is a violation),
 *   and whether their lastError was truncated and its password redacted;
 * - the operator's decisions on parked messages (discarded, revived); a discarded message that
 *   reached the destination is a violation.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { Kafka, logLevel } from 'kafkajs';
import type { ChaosDatabase } from './database.js';
import {
  DLQ_MAX_ATTEMPTS,
  LEASE_TIMEOUT,
  MAX_ERROR_LENGTH,
  OPERATOR_LOG,
  type OperatorAction,
  type OutboxMode,
} from './config.js';
import type { FaultKind } from './faults.js';

export interface FaultRecord {
  kind: FaultKind;
  /** The child it hit (relay or publisher label), if any. */
  target?: string;
  start: number;
  end: number;
  detail?: string;
}

export interface Delivery {
  id: number;
  group: string | null;
  groupSeq: number;
  node: string;
  attempts: number;
  hash: string;
  at: number;
}

export interface OutboxReport {
  outbox: string;
  /** 'parked': dead-letter with `onDead: 'park'`, whose dead messages the operator decides. */
  mode: 'strict' | 'dead-letter' | 'parked';
  notify: boolean;
  destination: 'table' | 'kafka' | 'broker';
  committed: number;
  rolledBack: number;
  delivered: number;
  lost: number;
  phantom: number;
  rolledBackDelivered: number;
  reordered: number;
  corrupted: number;
  duplicates: number;
  duplicateCauses: Record<string, number>;
  /** One duplicate per cause, to check the attribution by hand. */
  duplicateExamples: Record<string, string>;
  dead: number;
  deadPoison: number;
  deadOther: number;
  /** Parked messages the operator discarded, and revived with retryDead. */
  discarded: number;
  revived: number;
  /** Discarded messages that reached the destination: must be 0. */
  discardedDelivered: number;
  pendingAtEnd: number;
  lastErrorTooLong: number;
  secretLeaked: number;
  examples: string[];
}

export interface CheckInput {
  /** The outbox's database, at `appUrl`; the destination's is Postgres. */
  database: ChaosDatabase;
  appUrl: string;
  sinkUrl: string;
  kafka: { brokers: string[]; topic: string } | null;
  runDir: string;
  modes: readonly OutboxMode[];
  faults: readonly FaultRecord[];
  table: string;
}

export interface CheckResult {
  outboxes: OutboxReport[];
  total: OutboxReport;
  /** Group sequences with a hole among committed messages: the truth data itself is wrong. */
  truthGaps: number;
}

const SECRET = 's3cr3t-chaos-password';

interface NodeEvent {
  t: number;
  node: string;
  kind: string;
}

export async function check(input: CheckInput): Promise<CheckResult> {
  const app = input.database.pool(input.appUrl, { max: 1, name: 'checker' });
  const sink = new pg.Client({ connectionString: input.sinkUrl });
  await sink.connect();
  try {
    const rolledBack = readRolledBack(input.runDir);
    const operator = readOperator(input.runDir);
    const events = readEvents(input.runDir);
    // char_length: characters on both databases (MySQL's length() counts bytes).
    const leftovers = (
      await app.query<{
        id: string | number;
        outbox: string;
        status: number;
        attempts: number;
        error_length: number | null;
        leaked: boolean | number | null;
      }>(
        `SELECT id, outbox, status, attempts, char_length(last_error) AS error_length, last_error LIKE ? AS leaked FROM ${input.table}`,
        [`%${SECRET}%`],
      )
    ).map((r) => ({ ...r, leaked: Boolean(r.leaked) }));
    const sinkDeliveries = await readSinkDeliveries(sink);
    const kafkaDeliveries = input.kafka ? await readKafka(input.kafka) : new Map<string, Delivery[]>();
    let truthGaps = 0;
    const reports: OutboxReport[] = [];
    for (const mode of input.modes) {
      const published = (
        await app.query<{
          message_id: string | number;
          group_key: string | null;
          seq: string | number;
          hash: string;
          poison: boolean | number;
        }>(
          'SELECT message_id, group_key, seq, hash, poison FROM published WHERE outbox = ? ORDER BY message_id',
          [mode.name],
        )
      ).map((r) => ({ ...r, poison: Boolean(r.poison) }));
      const deliveries =
        (mode.destination === 'kafka' ? kafkaDeliveries.get(mode.name) : sinkDeliveries.get(mode.name)) ?? [];
      const report = checkOutbox(
        mode,
        published,
        deliveries,
        rolledBack,
        operator.filter((a) => a.outbox === mode.name),
        leftovers,
        input.faults,
        events,
      );
      truthGaps += countTruthGaps(published);
      reports.push(report);
    }
    return { outboxes: reports, total: sum(reports), truthGaps };
  } finally {
    await app.end().catch(() => undefined);
    await sink.end().catch(() => undefined);
  }
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

function readOperator(runDir: string): OperatorAction[] {
  const file = join(runDir, OPERATOR_LOG);
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim())
    .map((line) => JSON.parse(line) as OperatorAction);
}

function readEvents(runDir: string): NodeEvent[] {
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

async function readSinkDeliveries(sink: pg.Client): Promise<Map<string, Delivery[]>> {
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
async function readKafka(kafka: { brokers: string[]; topic: string }): Promise<Map<string, Delivery[]>> {
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

function countTruthGaps(
  published: ReadonlyArray<{ group_key: string | null; seq: string | number }>,
): number {
  const seqs = new Map<string, number[]>();
  for (const p of published) {
    if (p.group_key === null) continue;
    let list = seqs.get(p.group_key);
    if (list === undefined) seqs.set(p.group_key, (list = []));
    list.push(Number(p.seq));
  }
  let gaps = 0;
  for (const list of seqs.values()) {
    list.sort((a, b) => a - b);
    list.forEach((s, i) => {
      if (s !== i + 1) gaps += 1;
    });
  }
  return gaps;
}

function checkOutbox(
  mode: OutboxMode,
  published: ReadonlyArray<{
    message_id: string | number;
    group_key: string | null;
    seq: string | number;
    hash: string;
    poison: boolean;
  }>,
  deliveries: readonly Delivery[],
  rolledBack: ReadonlySet<number>,
  operator: readonly OperatorAction[],
  leftovers: ReadonlyArray<{
    id: string | number;
    outbox: string;
    status: number;
    attempts: number;
    error_length: number | null;
    leaked: boolean;
  }>,
  faults: readonly FaultRecord[],
  events: readonly NodeEvent[],
): OutboxReport {
  const committed = new Map(published.map((p) => [Number(p.message_id), p]));
  const report: OutboxReport = {
    ...emptyReport(
      mode.name,
      mode.strict ? 'strict' : mode.onDead === 'park' ? 'parked' : 'dead-letter',
      mode.notify,
      mode.destination,
    ),
    committed: committed.size,
  };
  const example = (text: string): void => {
    if (report.examples.length < 10) report.examples.push(text);
  };

  const previous = new Map<number, Delivery>();
  const lastOfGroup = new Map<string, { id: number; seq: number; delivery: Delivery }>();
  const phantoms = new Set<number>();
  for (const d of deliveries) {
    const truth = committed.get(d.id);
    if (truth === undefined) {
      if (!phantoms.has(d.id)) {
        phantoms.add(d.id);
        if (rolledBack.has(d.id)) {
          report.rolledBackDelivered += 1;
          example(`message ${d.id} of a rolled-back transaction was delivered by ${d.node}`);
        } else example(`message ${d.id} was delivered by ${d.node} but never committed`);
      }
      continue;
    }
    if (truth.hash !== d.hash) {
      report.corrupted += 1;
      example(`message ${d.id} arrived with different content (hash ${d.hash}, published ${truth.hash})`);
    }
    const before = previous.get(d.id);
    previous.set(d.id, d);
    if (before !== undefined) {
      report.duplicates += 1;
      // The destination's order says which arrived first; the relays' clocks say which was sent first.
      const [a, b] = before.at <= d.at ? [before, d] : [d, before];
      const cause = duplicateCause(a, b, faults, events);
      report.duplicateCauses[cause] = (report.duplicateCauses[cause] ?? 0) + 1;
      const described = `message ${d.id}: by ${a.node} (attempt ${a.attempts}) at ${new Date(a.at).toISOString()}, again by ${b.node} (attempt ${b.attempts}) at ${new Date(b.at).toISOString()}`;
      report.duplicateExamples[cause] ??= described;
      if (cause === 'unexplained') example(`unexplained duplicate: ${described}`);
      continue;
    }
    report.delivered += 1;
    if (d.group === null) continue;
    const last = lastOfGroup.get(d.group);
    if (last !== undefined && (d.id < last.id || d.groupSeq <= last.seq)) {
      report.reordered += 1;
      // Who delivered each, at which attempt and when: what a diagnosis starts from.
      const by = (x: Delivery) => `by ${x.node} (attempt ${x.attempts}) at ${new Date(x.at).toISOString()}`;
      example(
        `group ${d.group}: ${d.id} (seq ${d.groupSeq}) ${by(d)} first delivered after ${last.id} (seq ${last.seq}) ${by(last.delivery)}`,
      );
    }
    if (last === undefined || d.id > last.id)
      lastOfGroup.set(d.group, { id: d.id, seq: d.groupSeq, delivery: d });
  }
  report.phantom = phantoms.size;
  for (const id of committed.keys()) if (rolledBack.has(id)) report.rolledBack += 1;

  const dead = new Set<number>();
  for (const row of leftovers) {
    if (row.outbox !== mode.name) continue;
    const id = Number(row.id);
    if (row.status === 3) {
      dead.add(id);
      report.dead += 1;
      if (committed.get(id)?.poison) report.deadPoison += 1;
      else report.deadOther += 1;
      if (mode.strict) example(`message ${id} went dead in a strict outbox`);
      if (!mode.strict && row.attempts > DLQ_MAX_ATTEMPTS && !committed.get(id)?.poison)
        example(`message ${id} went dead after ${row.attempts} attempts`);
    } else if (row.status < 3) {
      report.pendingAtEnd += 1;
    }
    if ((row.error_length ?? 0) > MAX_ERROR_LENGTH) report.lastErrorTooLong += 1;
    if (row.leaked) report.secretLeaked += 1;
  }
  const discarded = new Set(operator.filter((a) => a.action === 'discard').map((a) => a.id));
  report.discarded = discarded.size;
  report.revived = operator.filter((a) => a.action === 'retry').length;
  for (const id of discarded) {
    if (!previous.has(id)) continue;
    report.discardedDelivered += 1;
    example(`message ${id} was discarded by the operator and reached the destination`);
  }
  for (const [id, truth] of committed) {
    if (previous.has(id) || dead.has(id) || discarded.has(id)) continue;
    report.lost += 1;
    example(`message ${id} (group ${truth.group_key}) was committed and never delivered`);
  }
  const poisonDelivered = deliveries.filter((d) => committed.get(d.id)?.poison).length;
  if (poisonDelivered > 0) example(`${poisonDelivered} poison messages reached the destination`);
  return report;
}

/**
 * Why `again` is a second delivery of what `before` delivered. A redelivery with a higher attempt
 * count means the relay reported a failure after the destination had it; the same attempt count
 * means the batch was never settled. Either way, the fault active around that time is the cause.
 */
function duplicateCause(
  before: Delivery,
  again: Delivery,
  faults: readonly FaultRecord[],
  events: readonly NodeEvent[],
): string {
  const from = before.at - 1000;
  const to = again.at;
  const overlapping = (f: FaultRecord, slack = 0): boolean => f.start <= to && f.end + slack >= from;
  const onNode = (f: FaultRecord): boolean => f.target === before.node;
  const pick = (kinds: readonly FaultKind[], test: (f: FaultRecord) => boolean): string | undefined =>
    faults.find((f) => kinds.includes(f.kind) && test(f))?.kind;

  if (again.attempts > before.attempts) {
    return (
      pick(['destination-down', 'destination-slow'], (f) => overlapping(f, 1000)) ??
      pick(['db-restart', 'db-crash', 'db-terminate', 'db-freeze'], (f) => overlapping(f, 1000)) ??
      'destination error after the write (no fault)'
    );
  }
  return (
    // The node that delivered first died (or stopped) before it could acknowledge.
    pick(
      ['relay-sigkill-mid-batch', 'relay-sigkill', 'relay-sigterm'],
      (f) => onNode(f) && f.end >= before.at && f.start <= to,
    ) ??
    // Either node was paused: the first lost its partition meanwhile, or the second is a zombie
    // that woke up and finished a batch the new owner had already delivered.
    pick(
      ['relay-pause'],
      (f) =>
        (f.target === before.node || f.target === again.node) &&
        f.start <= to &&
        f.end + 2 * LEASE_TIMEOUT >= from,
    ) ??
    pick(['db-restart', 'db-crash', 'db-terminate', 'db-freeze'], (f) => overlapping(f, LEASE_TIMEOUT)) ??
    pick(['destination-down', 'destination-slow'], (f) => overlapping(f, LEASE_TIMEOUT)) ??
    (events.some((e) => e.node === before.node && e.kind === 'lease-lost' && e.t >= before.at && e.t <= to)
      ? 'lease lost without an injected fault (event loop or database stalled under load)'
      : events.some((e) => e.node === before.node && e.t >= before.at - 1000 && e.t <= to)
        ? 'settle failed without an injected fault'
        : 'unexplained')
  );
}

/** A report with every count at zero. */
function emptyReport(
  outbox: string,
  mode: OutboxReport['mode'],
  notify: boolean,
  destination: OutboxReport['destination'],
): OutboxReport {
  return {
    outbox,
    mode,
    notify,
    destination,
    committed: 0,
    rolledBack: 0,
    delivered: 0,
    lost: 0,
    phantom: 0,
    rolledBackDelivered: 0,
    reordered: 0,
    corrupted: 0,
    duplicates: 0,
    duplicateCauses: {},
    duplicateExamples: {},
    dead: 0,
    deadPoison: 0,
    deadOther: 0,
    discarded: 0,
    revived: 0,
    discardedDelivered: 0,
    pendingAtEnd: 0,
    lastErrorTooLong: 0,
    secretLeaked: 0,
    examples: [],
  };
}

function sum(reports: readonly OutboxReport[]): OutboxReport {
  const total = emptyReport('total', 'strict', false, 'table');
  for (const r of reports) {
    for (const key of Object.keys(total) as Array<keyof OutboxReport>) {
      if (typeof total[key] === 'number') (total[key] as number) += r[key] as number;
    }
    for (const [cause, n] of Object.entries(r.duplicateCauses))
      total.duplicateCauses[cause] = (total.duplicateCauses[cause] ?? 0) + n;
    for (const [cause, text] of Object.entries(r.duplicateExamples))
      total.duplicateExamples[cause] ??= `${r.outbox}: ${text}`;
    total.examples.push(...r.examples.map((e) => `${r.outbox}: ${e}`));
  }
  return total;
}

/** The violations of a result; empty when the run proved what it should. */
export function violations(result: CheckResult): string[] {
  const found: string[] = [];
  for (const r of result.outboxes) {
    const say = (n: number, what: string): void => {
      if (n > 0) found.push(`${r.outbox}: ${n} ${what}`);
    };
    say(r.lost, 'lost');
    say(r.phantom, 'phantom (delivered, never committed)');
    say(r.rolledBackDelivered, 'delivered from rolled-back transactions');
    say(r.reordered, 'order violations among first deliveries');
    say(r.corrupted, 'corrupted on the way');
    say(r.pendingAtEnd, 'still pending after the drain');
    say(r.lastErrorTooLong, `lastError longer than maxErrorLength (${MAX_ERROR_LENGTH})`);
    say(r.secretLeaked, 'lastError with the password of a connection string');
    say(r.discardedDelivered, 'discarded by the operator, yet delivered');
    if (r.mode === 'strict') say(r.dead, 'dead in a strict outbox');
    if (r.committed === 0) found.push(`${r.outbox}: nothing committed, nothing proved`);
    if (r.rolledBack > 0) found.push(`${r.outbox}: ${r.rolledBack} rolled-back ids appear as committed`);
  }
  if (result.truthGaps > 0) found.push(`${result.truthGaps} holes in committed group sequences`);
  return found;
}
