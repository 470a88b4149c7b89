/**
 * Shared pieces of the benchmark: settings from the environment, payloads, timing and CPU
 * accounting. Nothing here knows about a particular row or database (bench/postgres.ts and
 * bench/mysql.ts hold each server's fixtures).
 */
import { readFileSync } from 'node:fs';
import { hashGroupKey } from 'outboxer';

export type BenchDb = 'postgres' | 'mysql' | 'sqlite';

/** Each server's benchmark database, created for the run (and dropped after it on MySQL). */
const DEFAULT_URLS: Record<Exclude<BenchDb, 'sqlite'>, string> = {
  postgres: 'postgres://postgres@127.0.0.1:5432/outboxer_bench',
  mysql: 'mysql://root@127.0.0.1:3306/outboxer_bench',
};

export interface BenchSettings {
  readonly db: BenchDb;
  /** Row counts are multiplied by this. */
  readonly scale: number;
  /** Print (and record) the plans of the poll, the acknowledge, counts and prune. */
  readonly plans: boolean;
  /** A smoke run with tiny counts: checks that every row completes, says nothing about speed. */
  readonly quick: boolean;
  /** Only these groups (publish, relay, poll (with counts and prune), latency, memory, peers, dashboard). */
  readonly only: readonly string[] | undefined;
  /** Only the broker rows whose name contains one of these (`BENCH_BROKERS=nats,kafkajs`). */
  readonly brokers: readonly string[] | undefined;
  /** Where the report goes; default docs/benchmarks.md (full runs) or .tmp/ (quick runs). */
  readonly out: string | undefined;
  /** The benchmark's own database (created when missing). */
  readonly url: string;
}

export function readSettings(env: NodeJS.ProcessEnv = process.env): BenchSettings {
  const db = env.BENCH_DB ?? 'postgres';
  if (db !== 'postgres' && db !== 'mysql' && db !== 'sqlite')
    throw new Error(`BENCH_DB must be postgres, mysql or sqlite; got ${db}`);
  const scale = Number(env.BENCH_SCALE ?? 1);
  if (!(scale > 0)) throw new Error(`BENCH_SCALE must be a positive number; got ${env.BENCH_SCALE}`);
  return {
    db,
    scale,
    plans: env.BENCH_PLANS === '1',
    quick: env.BENCH_QUICK === '1',
    only: env.BENCH_ONLY ? env.BENCH_ONLY.split(',').map((s) => s.trim()) : undefined,
    brokers: env.BENCH_BROKERS ? env.BENCH_BROKERS.split(',').map((s) => s.trim().toLowerCase()) : undefined,
    out: env.BENCH_OUT,
    url: env.BENCH_DATABASE_URL ?? (db === 'sqlite' ? '' : DEFAULT_URLS[db]),
  };
}

/** A row count: `base × BENCH_SCALE`, or `quick` in a smoke run. */
export function rows(settings: BenchSettings, base: number, quick: number): number {
  return settings.quick ? quick : Math.max(1, Math.round(base * settings.scale));
}

// ---------------------------------------------------------------------------------------------
// Payloads: every message carries exactly 200 bytes of JSON, in JS and in SQL fills alike.

const PAD = 'x'.repeat(173);

/** `{"n":"0000000042","pad":"xxx…"}`: 200 bytes once encoded. */
export function payload(n: number): { n: string; pad: string } {
  return { n: String(n).padStart(10, '0'), pad: PAD };
}

/** The same 200-byte document built in SQL from an integer expression, in `dialect`. */
export function sqlPayload(expression: string, dialect: 'postgres' | 'mysql' = 'postgres'): string {
  return dialect === 'postgres'
    ? `('{"n":"' || lpad((${expression})::text, 10, '0') || '","pad":"' || repeat('x', 173) || '"}')`
    : `CONCAT('{"n":"', LPAD(${expression}, 10, '0'), '","pad":"', REPEAT('x', 173), '"}')`;
}

const root = new URL('..', import.meta.url);

/** The installed version of a package (or of outboxer itself), for the report. */
export function packageVersion(name: string): string {
  try {
    const file = new URL(name === 'outboxer' ? 'package.json' : `node_modules/${name}/package.json`, root);
    return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
  } catch {
    return 'not installed';
  }
}

/** Group keys used everywhere: `order:0` … `order:<groups-1>`. */
export function groupKey(n: number, groups: number): string {
  return `order:${n % groups}`;
}

/** The partition outboxer computes for each of those group keys (FNV-1a, as the engine does). */
export function partitionsOfGroups(groups: number, partitions: number, prefix = 'order:'): number[] {
  return Array.from({ length: groups }, (_, k) => hashGroupKey(`${prefix}${k}`) % partitions);
}

// ---------------------------------------------------------------------------------------------
// Statistics and timing

export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[index]!;
}

export const median = (values: readonly number[]): number => quantile(values, 0.5);

export async function seconds<T>(fn: () => Promise<T>): Promise<{ value: T; seconds: number }> {
  const started = performance.now();
  const value = await fn();
  return { value, seconds: (performance.now() - started) / 1000 };
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// CPU: how busy the machine and this process were while a row ran, to tell our limits from the
// machine's (2 cores shared by Node and Postgres).

interface ProcStat {
  busy: number;
  total: number;
}

function readProcStat(): ProcStat | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const fields = line.trim().split(/\s+/).slice(1).map(Number);
    const total = fields.slice(0, 8).reduce((a, b) => a + b, 0);
    const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
    return { busy: total - idle, total };
  } catch {
    return undefined;
  }
}

export interface CpuUse {
  /** Share of all cores that were busy (0..1). */
  machine: number | undefined;
  /** This Node process, in cores (1 = one core fully used). */
  node: number;
}

export function cpuMeter(): { stop(): CpuUse } {
  const stat = readProcStat();
  const usage = process.cpuUsage();
  const started = performance.now();
  return {
    stop() {
      const end = readProcStat();
      const used = process.cpuUsage(usage);
      const elapsedUs = (performance.now() - started) * 1000;
      const machine =
        stat && end && end.total > stat.total ? (end.busy - stat.busy) / (end.total - stat.total) : undefined;
      return { machine, node: (used.user + used.system) / elapsedUs };
    },
  };
}

export function describeCpu(cpu: CpuUse | undefined): string {
  if (cpu === undefined) return '';
  const machine = cpu.machine === undefined ? '' : `machine ${(cpu.machine * 100).toFixed(0)}% busy, `;
  return `${machine}Node ${(cpu.node * 100).toFixed(0)}% of a core`;
}
