/** The printed table of a chaos run (also written to report.md in its run directory). */
import type { CheckResult } from './checker.js';
import type { FaultRecord } from './faults.js';
import type { OutboxReport } from './outbox-check.js';
import type { FaultKind } from './faults.js';
import { formatInboxReport, type InboxReport } from './inbox-check.js';

export interface RunReport {
  /** The outbox's database: 'PostgreSQL' or 'MariaDB'. */
  database: string;
  seed: number;
  seconds: number;
  rate: number;
  startedAt: string;
  wallSeconds: number;
  kafka: boolean;
  faults: FaultRecord[];
  descriptions: Record<FaultKind, string>;
  result: CheckResult;
  drainAfterLastFaultMs: number | null;
  drainAfterPublishersMs: number | null;
  stops: Array<{
    label: string;
    stopMs: number | null;
    exitMs: number;
    code: number | null;
    loopMaxMs?: number;
  }>;
  publisherExits: number;
  relayExits: number;
  crashes: string[];
  startFailures: number;
  commitsDuringOutages: number[];
  transactions: number;
  /** Where the tallies `counts()` sums differ from the rows after the drain, per outbox: none expected. */
  tallyDrift: string[];
  /** The inbox's end-to-end proof, in a run with `CHAOS_BROKER`. */
  inbox?: InboxReport;
  violations: string[];
}

const ROWS: Array<[string, (r: OutboxReport) => string | number]> = [
  ['mode', (r) => (r.outbox === 'total' ? '' : r.mode)],
  ['notify', (r) => (r.outbox === 'total' ? '' : r.notify ? 'on' : 'off')],
  ['destination', (r) => (r.outbox === 'total' ? '' : r.destination)],
  ['committed', (r) => r.committed],
  ['delivered', (r) => r.delivered],
  ['**lost**', (r) => r.lost],
  ['**phantom** (delivered, never committed)', (r) => r.phantom],
  ['**from rolled-back transactions**', (r) => r.rolledBackDelivered],
  ['**reordered** (first deliveries, per group)', (r) => r.reordered],
  ['corrupted', (r) => r.corrupted],
  ['duplicates', (r) => r.duplicates],
  ['dead (maxAttempts reached)', (r) => r.dead],
  ['  of which poison', (r) => r.deadPoison],
  ['discarded / revived by the operator', (r) => `${r.discarded} / ${r.revived}`],
  ['pending after the drain', (r) => r.pendingAtEnd],
  ['lastError over limit / with a password', (r) => `${r.lastErrorTooLong} / ${r.secretLeaked}`],
];

const fmt = (n: number | string): string => (typeof n === 'number' ? n.toLocaleString('en-US') : n);

export function formatReport(report: RunReport): string {
  const columns = [...report.result.outboxes, report.result.total];
  const lines: string[] = [];
  lines.push(
    `### Chaos run on ${report.database}: seed ${report.seed}, ${report.seconds} s of faults, ${report.wallSeconds} s in all, Kafka ${report.kafka ? 'on' : 'off'}`,
    '',
    `| | ${columns.map((c) => c.outbox).join(' | ')} |`,
    `|---|${columns.map(() => '---:').join('|')}|`,
  );
  for (const [name, get] of ROWS) lines.push(`| ${name} | ${columns.map((c) => fmt(get(c))).join(' | ')} |`);
  lines.push('');

  const causes = Object.entries(report.result.total.duplicateCauses).sort((a, b) => b[1] - a[1]);
  lines.push('Duplicates by the fault that caused them:', '');
  if (causes.length === 0) lines.push('- none');
  for (const [cause, n] of causes)
    lines.push(`- ${cause}: ${fmt(n)} (e.g. ${report.result.total.duplicateExamples[cause] ?? '-'})`);
  lines.push('');

  const byKind = new Map<string, number>();
  for (const f of report.faults) byKind.set(f.kind, (byKind.get(f.kind) ?? 0) + 1);
  lines.push(
    `Faults injected (${report.faults.length}): ${[...byKind].map(([k, n]) => `${k} ×${n}`).join(', ')}.`,
    '',
  );
  const graceful = report.stops.filter((s) => s.stopMs !== null);
  // A relay that was paused on purpose saw its pause as event-loop delay: leave it out.
  const paused = new Set(report.faults.filter((f) => f.kind === 'relay-pause').map((f) => f.target));
  const loopMax = Math.max(
    0,
    ...report.stops.filter((s) => !paused.has(s.label)).map((s) => s.loopMaxMs ?? 0),
  );
  lines.push(
    `- transactions committed: ${fmt(report.transactions)}; commits while the destination was down: ${report.commitsDuringOutages.map(fmt).join(', ') || 'no outage'}`,
    `- time to drain after the last fault: ${report.drainAfterLastFaultMs === null ? 'NOT DRAINED' : `${(report.drainAfterLastFaultMs / 1000).toFixed(1)} s`} (${report.drainAfterPublishersMs === null ? '-' : `${(report.drainAfterPublishersMs / 1000).toFixed(1)} s`} after the publishers stopped)`,
    `- counts(): ${report.tallyDrift.length === 0 ? 'the tallies equal the rows in every outbox' : report.tallyDrift.join('; ')}`,
    `- graceful stops: ${graceful.length}, longest stop() ${Math.max(0, ...graceful.map((s) => s.stopMs!))} ms; relay processes ended ${report.relayExits} times (${report.startFailures} failed to start while the database was down, ${report.crashes.length} crashed), publishers ${report.publisherExits} times`,
    `- longest event-loop delay seen by a relay that stopped gracefully: ${loopMax.toFixed(0)} ms`,
    '',
  );
  if (report.inbox !== undefined) lines.push(formatInboxReport(report.inbox));
  if (report.result.total.examples.length > 0) {
    lines.push('Examples:', '', ...report.result.total.examples.slice(0, 20).map((e) => `- ${e}`), '');
  }
  lines.push(
    report.violations.length === 0
      ? 'Result: PASS'
      : `Result: FAIL\n\n${report.violations.map((v) => `- ${v}`).join('\n')}`,
  );
  return lines.join('\n') + '\n';
}
