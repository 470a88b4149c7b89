/**
 * The benchmark's smoke run (BENCH_QUICK=1) on Postgres and SQLite: every row runs on tiny counts
 * and the run completes. Nothing is timed or compared here; the full run is the judge of speed.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, test } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = mkdtempSync(join(tmpdir(), 'outboxer-bench-smoke-'));

afterAll(() => rmSync(out, { recursive: true, force: true }));

function runQuick(db: 'postgres' | 'sqlite') {
  const file = join(out, `${db}.md`);
  const result = spawnSync(process.execPath, ['--import', 'tsx', join(root, 'bench/run.ts')], {
    cwd: root,
    env: {
      ...process.env,
      BENCH_QUICK: '1',
      BENCH_DB: db,
      BENCH_OUT: file,
      BENCH_PLANS: db === 'postgres' ? '1' : '0',
    },
    encoding: 'utf8',
    timeout: 170_000,
  });
  return { ...result, report: result.status === 0 ? readFileSync(file, 'utf8') : '' };
}

describe('npm run bench, BENCH_QUICK=1', () => {
  test('Postgres: every group of rows completes and the report is written', { timeout: 180_000 }, () => {
    const run = runQuick('postgres');
    expect(run.status, `${run.stdout}\n${run.stderr}`).toBe(0);
    for (const row of [
      'Publish, 1 message per transaction, 1 writer',
      'Publish, 100 messages per transaction',
      'Relay, 4 partitions',
      'One poll, a blocked group',
      '`counts()` on',
      'Prune delivered rows',
      'Prune with nothing older than the window',
      'Pickup latency, `notify: true`',
      'peak RSS',
      'pg-boss',
      'in order per key',
      'Inbox `handle`, 1 message per transaction, 10 writers',
    ]) {
      expect(run.report).toContain(row);
    }
    expect(run.report).not.toContain('failed:');
  });

  test('SQLite: publish and relay rows complete', { timeout: 120_000 }, () => {
    const run = runQuick('sqlite');
    expect(run.status, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.report).toContain('Relay, `batchSize: 1000`');
    expect(run.report).not.toContain('failed:');
  });
});
