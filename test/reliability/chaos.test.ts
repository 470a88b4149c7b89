/**
 * The short chaos runs of the test suite: `chaos/run.ts` with one fault of every kind (relay
 * SIGKILL mid-batch and at random, SIGTERM, SIGSTOP; database restarted, killed, connections cut,
 * server frozen; destination down and slow; publishers killed before and after COMMIT), on its own
 * throwaway servers, while an operator discards or revives what an `onDead: 'park'` outbox parks:
 * 45 seconds of faults on Postgres with Kafka when it answers, and a shorter run on MariaDB
 * (`CHAOS_DB=mysql`, through outboxer/mysql2) without Kafka. The assertions are about correctness
 * only: nothing lost, nothing phantom, nothing from a rolled-back transaction, no group reordered,
 * no process crashed. Timing only bounds the drain, generously.
 * CHAOS_SEED picks another schedule; the long run is `npm run chaos` (docs/reliability.md).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect, test } from 'vitest';
import { FAULT_KINDS } from '../../chaos/faults.js';
import type { RunReport } from '../../chaos/report.js';

const root = resolve(import.meta.dirname, '../..');

/** Runs chaos/run.ts with `env`; resolves with its report, printed, and its exit code. */
async function chaosRun(
  env: Record<string, string>,
  stopAfter: number,
): Promise<{ report: RunReport; code: number | null }> {
  const out = mkdtempSync(join(tmpdir(), 'outboxer-chaos-test-'));
  const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'chaos/run.ts')], {
    cwd: root,
    env: { ...process.env, ...env, CHAOS_OUT: out },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  // Past the test's own timeout the harness is told to stop, and it removes its servers.
  const stop = setTimeout(() => child.kill('SIGTERM'), stopAfter);
  const code = await new Promise<number | null>((done) => child.once('exit', (c) => done(c)));
  clearTimeout(stop);
  try {
    let report: RunReport;
    try {
      report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as RunReport;
    } catch {
      throw new Error(`the chaos run wrote no report (exit ${code}):\n${output.slice(-5000)}`);
    }
    console.log(readFileSync(join(out, 'report.md'), 'utf8'));
    return { report, code };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

/** What every chaos run must show, whatever its database. */
function expectSound({ report, code }: { report: RunReport; code: number | null }): void {
  const { total, outboxes } = report.result;
  expect(total.lost, 'lost').toBe(0);
  expect(total.phantom, 'phantom').toBe(0);
  expect(total.rolledBackDelivered, 'delivered from rolled-back transactions').toBe(0);
  expect(total.reordered, 'order violations').toBe(0);
  expect(total.corrupted, 'corrupted').toBe(0);
  expect(total.pendingAtEnd, 'pending after the drain').toBe(0);
  expect(report.tallyDrift, 'counts() tallies against the rows').toEqual([]);
  expect(report.crashes, 'crashed processes').toEqual([]);
  for (const outbox of outboxes) {
    expect(outbox.committed, `${outbox.outbox} committed`).toBeGreaterThan(100);
    if (outbox.mode === 'strict') expect(outbox.dead, `${outbox.outbox} dead`).toBe(0);
    // The operator discarded the poison messages parked while the relays drained (the seed's
    // publishers make some), and none of them reached the destination.
    if (outbox.mode === 'parked') {
      expect(outbox.discarded, `${outbox.outbox} discarded`).toBeGreaterThan(0);
      expect(outbox.discardedDelivered, `${outbox.outbox} discarded, yet delivered`).toBe(0);
    }
  }
  // Every kind of fault was played (one is skipped only when no child came alive within 20 s to take it).
  const played = new Set(report.faults.map((f) => f.kind));
  expect(FAULT_KINDS.filter((k) => !played.has(k))).toEqual([]);
  expect(report.drainAfterLastFaultMs).not.toBeNull();
  expect(report.violations).toEqual([]);
  expect(code).toBe(0);
}

test('a short chaos run loses nothing, delivers nothing uncommitted, and reorders no group', async () => {
  const run = await chaosRun(
    {
      CHAOS_SECONDS: process.env.CHAOS_TEST_SECONDS ?? '45',
      CHAOS_SEED: process.env.CHAOS_SEED ?? '20260101',
      CHAOS_RATE: '300',
      CHAOS_DRAIN_TIMEOUT: '150',
    },
    280_000,
  );
  expect(run.report.database).toBe('PostgreSQL');
  expectSound(run);
}, 300_000);

test('the same on MariaDB, through outboxer/mysql2', async () => {
  const run = await chaosRun(
    {
      CHAOS_DB: 'mysql',
      CHAOS_SECONDS: process.env.CHAOS_TEST_SECONDS ?? '12',
      CHAOS_SEED: process.env.CHAOS_SEED ?? '20261202',
      CHAOS_RATE: '300',
      // Ten times the usual share of poison messages: a run this short must still park some.
      CHAOS_POISON: '0.03',
      CHAOS_KAFKA: '0',
      CHAOS_DRAIN_TIMEOUT: '60',
    },
    110_000,
  );
  expect(run.report.database).toBe('MariaDB');
  expectSound(run);
}, 120_000);
