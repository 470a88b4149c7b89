/**
 * The benchmark's results as rows, printed as markdown tables and written between markers into
 * docs/benchmarks.md, so that the hand-written analysis around them survives a new run.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { BenchDb } from './support.js';

export interface Figure {
  readonly value: number;
  /** `txn/s`, `msg/s`, `rows/s`, `ms`, `MB`. */
  readonly unit: string;
  /** Shown instead of the number (e.g. `p50 1.2 / p99 3.4 ms`). */
  readonly text?: string;
}

export interface Target {
  /** What is asked, e.g. `≥ 85% of the limit`. */
  readonly text: string;
  /** The measured ratio that is judged, already formatted, e.g. `97%` or `1.1×`. */
  readonly measured: string;
  /** undefined: not judged (quick run, or a figure without a target). */
  readonly met: boolean | undefined;
}

export interface BenchRow {
  readonly group: string;
  readonly what: string;
  readonly ours?: Figure;
  /** The same work in plain SQL on the plain driver: the database's own limit. */
  readonly limit?: { readonly label: string; readonly figure: Figure };
  /** ours as a share of the limit (throughput) or limit/ours (times), formatted. */
  readonly ofLimit?: string;
  readonly target?: Target;
  /** The published figure of the spec's table (Elixir, M3 Max, PostgreSQL 17 in 2 CPUs). */
  readonly spec?: string;
  readonly note?: string;
  /** Set when the row could not run (missing package, error). */
  readonly skipped?: string;
}

export interface PeerRow {
  readonly what: string;
  readonly ours: Figure | undefined;
  readonly peers: ReadonlyArray<{ readonly name: string; readonly figure?: Figure; readonly note?: string }>;
  /**
   * The same harness committing transactions that write one 4-byte row into a table without
   * indexes: the most any library can publish one message per transaction at on this machine.
   */
  readonly floor?: Figure;
  /** The plain one-row INSERT of outboxer's row into an identical table, in the same trials. */
  readonly plain?: Figure;
  readonly target?: Target;
}

export interface Report {
  readonly db: BenchDb;
  /** The section's title: the server that ran (default: from `db`). */
  readonly title?: string;
  readonly environment: ReadonlyArray<readonly [string, string]>;
  readonly rows: BenchRow[];
  readonly peers: PeerRow[];
  readonly plans: Array<{ readonly title: string; readonly plan: string }>;
  readonly notes: string[];
  readonly durationSeconds: number;
}

const integer = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

export function formatFigure(figure: Figure | undefined): string {
  if (figure === undefined) return '–';
  if (figure.text !== undefined) return figure.text;
  if (figure.unit === 'ms') return `${formatMs(figure.value)} ms`;
  if (figure.unit === 'MB') return `${figure.value.toFixed(0)} MB`;
  return `${integer.format(figure.value)} ${figure.unit}`;
}

export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  if (ms >= 100) return integer.format(ms);
  if (ms >= 10) return ms.toFixed(1);
  return ms.toFixed(2);
}

export const percent = (ratio: number): string => `${(ratio * 100).toFixed(0)}%`;
export const times = (ratio: number): string => `${ratio >= 10 ? ratio.toFixed(0) : ratio.toFixed(2)}×`;

function met(target: Target | undefined): string {
  if (target === undefined) return '';
  if (target.met === undefined) return '–';
  return target.met ? 'yes' : '**no**';
}

const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

export function renderRows(rows: readonly BenchRow[]): string {
  const lines = [
    '| What | outboxer | Plain SQL, plain driver (the limit) | outboxer vs limit | Target | Measured | Met | Spec figure |',
    '|---|---:|---|---:|---|---:|:---:|---:|',
  ];
  for (const row of rows) {
    if (row.skipped !== undefined) {
      lines.push(
        `| ${cell(row.what)} | skipped | ${cell(row.skipped)} | | ${cell(row.target?.text ?? '')} | | – | ${cell(row.spec ?? '')} |`,
      );
      continue;
    }
    const limit = row.limit === undefined ? '' : `${row.limit.label}: ${formatFigure(row.limit.figure)}`;
    lines.push(
      `| ${cell(row.what)} | ${cell(formatFigure(row.ours))} | ${cell(limit)} | ${row.ofLimit ?? ''} | ${cell(row.target?.text ?? '')} | ${cell(row.target?.measured ?? '')} | ${met(row.target)} | ${cell(row.spec ?? '')} |`,
    );
  }
  return lines.join('\n');
}

export function renderPeers(rows: readonly PeerRow[]): string {
  if (rows.length === 0) return '';
  const names = [...new Set(rows.flatMap((r) => r.peers.map((p) => p.name)))];
  // The references of the single-message rows, where measured: what any library could reach.
  const references = [
    { label: "Plain INSERT of outboxer's row", of: (row: PeerRow) => row.plain },
    { label: 'Floor: a one-row transaction', of: (row: PeerRow) => row.floor },
  ].filter((reference) => rows.some((row) => reference.of(row) !== undefined));
  const lines = [
    `| What | outboxer | ${[...names, ...references.map((r) => r.label)].join(' | ')} | Target | Measured | Met |`,
    `|---|---:|${[...names, ...references].map(() => '---:').join('|')}|---|---:|:---:|`,
  ];
  for (const row of rows) {
    const peerCells = names.map((name) => {
      const peer = row.peers.find((p) => p.name === name);
      if (peer === undefined) return '';
      if (peer.figure === undefined) return cell(peer.note ?? 'skipped');
      return cell(formatFigure(peer.figure) + (peer.note ? ` (${peer.note})` : ''));
    });
    const referenceCells = references.map((reference) => {
      const figure = reference.of(row);
      return figure === undefined ? '' : cell(formatFigure(figure));
    });
    lines.push(
      `| ${cell(row.what)} | ${cell(formatFigure(row.ours))} | ${[...peerCells, ...referenceCells].join(' | ')} | ${cell(row.target?.text ?? '')} | ${cell(row.target?.measured ?? '')} | ${met(row.target)} |`,
    );
  }
  return lines.join('\n');
}

export function renderReport(report: Report, options: { quick: boolean }): string {
  const title = report.title ?? { postgres: 'PostgreSQL', mysql: 'MySQL', sqlite: 'SQLite' }[report.db];
  const parts: string[] = [];
  parts.push(
    `### ${title}${report.db === 'mysql' ? ' (`BENCH_DB=mysql`)' : ''}${options.quick ? ' (BENCH_QUICK smoke run: the figures mean nothing)' : ''}`,
  );
  parts.push('');
  parts.push('| Setting | Value |\n|---|---|');
  parts.push(report.environment.map(([k, v]) => `| ${cell(k)} | ${cell(v)} |`).join('\n'));
  parts.push('');
  parts.push(renderRows(report.rows));
  const notes = report.rows.filter((r) => r.note !== undefined && r.skipped === undefined);
  if (notes.length > 0) {
    parts.push('');
    parts.push('Notes on the rows:');
    parts.push('');
    for (const row of notes) parts.push(`- **${row.what}**: ${row.note}`);
  }
  if (report.peers.length > 0) {
    parts.push('');
    parts.push(`#### The libraries users pick instead, same run`);
    parts.push('');
    parts.push(renderPeers(report.peers));
  }
  if (report.notes.length > 0) {
    parts.push('');
    for (const note of report.notes) parts.push(`- ${note}`);
  }
  if (report.plans.length > 0) {
    parts.push('');
    parts.push('#### Query plans (BENCH_PLANS=1)');
    for (const { title: planTitle, plan } of report.plans) {
      parts.push('');
      parts.push(`<details><summary>${planTitle}</summary>\n\n\`\`\`\n${plan}\n\`\`\`\n\n</details>`);
    }
  }
  parts.push('');
  parts.push(`Run time: ${report.durationSeconds.toFixed(0)} s.`);
  return parts.join('\n');
}

const SKELETON = `# Benchmarks

Generated by \`npm run bench\` (bench/run.ts). The tables between the markers are rewritten by every
full run; the text around them is not.

<!-- bench:postgres:begin -->
<!-- bench:postgres:end -->

<!-- bench:sqlite:begin -->
<!-- bench:sqlite:end -->

<!-- bench:mysql:begin -->
<!-- bench:mysql:end -->
`;

/**
 * Replaces the block of `db` between its markers, keeping everything else of the file (the other
 * databases' blocks and the text around them); a missing pair of markers is added at the end.
 */
export function writeReport(path: string, db: BenchDb, body: string): void {
  mkdirSync(dirname(path), { recursive: true });
  let text = existsSync(path) ? readFileSync(path, 'utf8') : SKELETON;
  const begin = `<!-- bench:${db}:begin -->`;
  const end = `<!-- bench:${db}:end -->`;
  if (!text.includes(begin) || !text.includes(end)) text = `${text.trimEnd()}\n\n${begin}\n${end}\n`;
  const before = text.slice(0, text.indexOf(begin) + begin.length);
  const after = text.slice(text.indexOf(end));
  writeFileSync(path, `${before}\n${body}\n${after}`);
}
