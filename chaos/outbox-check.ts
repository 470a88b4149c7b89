/**
 * The chaos checker's comparison for one outbox: what was committed against what its destination
 * recorded and what is left in the outbox table (lost, phantom, reordered, corrupted, duplicates
 * and their causes, dead messages, the operator's decisions), and the sum over the outboxes.
 */
import {
  DLQ_MAX_ATTEMPTS,
  LEASE_TIMEOUT,
  MAX_ERROR_LENGTH,
  type OperatorAction,
  type OutboxMode,
} from './config.js';
import type { Delivery, NodeEvent } from './checker-sources.js';
import type { FaultKind, FaultRecord } from './faults.js';

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

/** Group sequences with a hole among committed messages. */
export function countTruthGaps(
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

export function checkOutbox(
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

/** The counts of every outbox added up. */
export function sum(reports: readonly OutboxReport[]): OutboxReport {
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
