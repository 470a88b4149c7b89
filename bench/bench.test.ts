/**
 * The benchmark's smoke run (BENCH_QUICK=1) on Postgres, MariaDB (`BENCH_DB=mysql`) and SQLite:
 * every row runs on tiny counts and the run completes (on Postgres also the brokers group, into the
 * real brokers the relay tests use). Nothing is timed or compared here; the full
 * run is the judge of speed.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, test } from 'vitest';
import { writeReport } from './report.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = mkdtempSync(join(tmpdir(), 'outboxer-bench-smoke-'));

afterAll(() => rmSync(out, { recursive: true, force: true }));

// Postgres runs more groups than the others (brokers, idle, scale-out: child processes and real brokers), hence its own timeout.
function runQuick(db: 'postgres' | 'mysql' | 'sqlite', timeout = 170_000) {
  const file = join(out, `${db}.md`);
  // MariaDB: a database of this run's own (created and dropped by the run), beside any full run.
  const database =
    db === 'mysql'
      ? { BENCH_DATABASE_URL: `mysql://root@127.0.0.1:3306/outboxer_bench_smoke_${process.pid}` }
      : {};
  const result = spawnSync(process.execPath, ['--import', 'tsx', join(root, 'bench/run.ts')], {
    cwd: root,
    env: {
      ...process.env,
      BENCH_QUICK: '1',
      BENCH_DB: db,
      BENCH_OUT: file,
      BENCH_PLANS: db === 'sqlite' ? '0' : '1',
      ...database,
    },
    encoding: 'utf8',
    timeout,
  });
  return { ...result, report: result.status === 0 ? readFileSync(file, 'utf8') : '' };
}

describe('npm run bench, BENCH_QUICK=1', () => {
  // Postgres runs every group, the brokers', idle and scale-out too (about 75 s of it on a loaded machine).
  test('Postgres: every group of rows completes and the report is written', { timeout: 330_000 }, () => {
    const run = runQuick('postgres', 320_000);
    expect(run.status, `${run.stdout}\n${run.stderr}`).toBe(0);
    for (const row of [
      'Publish, 1 message per transaction, 1 writer',
      'Publish, 100 messages per transaction',
      'Relay, 4 partitions',
      'One poll, a blocked group',
      '`counts()` on',
      'Prune delivered rows',
      'Prune with nothing older than the window',
      'Pickup latency, published by the relaying instance',
      'Pickup latency, `notify: true`',
      'peak RSS',
      'pg-boss',
      'in order per key',
      'Inbox `handle`, 1 message per transaction, 10 writers',
      'Inbox store, then process',
      // The brokers group: a small backlog through each real broker, beside its client alone.
      'Relay into Kafka (@platformatic/kafka)',
      'Relay into Kafka (kafkajs)',
      'Relay into SQS, standard queue',
      'Relay into SQS, FIFO queue',
      'Relay into RabbitMQ',
      'Relay into NATS JetStream',
      'Relay into Redis Streams',
      'Relay into BullMQ',
      'Relay into a webhook',
      'An idle relaying node, 4 outboxes × 8 partitions, defaults',
      'An idle relaying node, 4 outboxes × 8 partitions, `notify: true`',
      'An idle relaying node, 4 outboxes × 64 partitions, `notify: true`',
      'processes sharing 32 partitions',
      'A second process joins one holding all 32 partitions',
      '`stop()` on one of two processes',
      'SIGKILL of one of two processes',
    ]) {
      expect(run.report).toContain(row);
    }
    expect(run.report).not.toContain('failed:');
  });

  test(
    'MariaDB (BENCH_DB=mysql): every group of rows completes and the report is written',
    { timeout: 180_000 },
    () => {
      const run = runQuick('mysql');
      expect(run.status, `${run.stdout}\n${run.stderr}`).toBe(0);
      for (const row of [
        '### MariaDB',
        'Publish, 1 message per transaction, 1 writer',
        'Publish, 1 message per transaction, 10 writers',
        'Same with `serializeWrites: true`',
        'Publish, 100 messages per transaction',
        'Relay, 4 partitions',
        '`retention: { keep }`',
        'One poll from the head, right after',
        'One poll, a blocked group',
        'blocked groups with 10 rows behind each',
        '`counts()` on',
        'Prune delivered rows',
        'Prune with nothing older than the window',
        'Pickup latency, published by the relaying instance',
        'Pickup latency, published by another instance, `pollInterval: 100`',
        'An idle relaying node, 4 outboxes × 8 partitions, defaults',
      ]) {
        expect(run.report).toContain(row);
      }
      expect(run.report).not.toContain('failed:');
    },
  );

  test('SQLite: publish and relay rows complete', { timeout: 120_000 }, () => {
    const run = runQuick('sqlite');
    expect(run.status, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.report).toContain('Relay, `batchSize: 1000`');
    expect(run.report).not.toContain('failed:');
  });
});

describe('docs/benchmarks.md', () => {
  test("a run rewrites its own database's block and keeps the others' and the text around them", () => {
    const file = join(out, 'benchmarks.md');
    writeReport(file, 'postgres', 'postgres 1');
    writeReport(file, 'mysql', 'mysql 1');
    writeReport(file, 'postgres', 'postgres 2');
    writeReport(file, 'mysql', 'mysql 2');
    const text = readFileSync(file, 'utf8');
    expect(text).toContain('<!-- bench:postgres:begin -->\npostgres 2\n<!-- bench:postgres:end -->');
    expect(text).toContain('<!-- bench:mysql:begin -->\nmysql 2\n<!-- bench:mysql:end -->');
    expect(text).toContain('<!-- bench:sqlite:begin -->\n<!-- bench:sqlite:end -->');
    expect(text).not.toMatch(/postgres 1|mysql 1/);
    expect(text).toMatch(/^# Benchmarks/);
  });
});
