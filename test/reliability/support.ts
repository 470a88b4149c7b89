/** Helpers of the reliability tests. */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import pg from 'pg';
import type { DatabaseAdapter, ErrorCode, SqlQuery } from 'outboxer';
import { Outboxer, functionRelay, isOutboxerError } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { FaultProxy } from '../../chaos/fault-proxy.js';
import { DATABASE_URL } from '../support/databases.js';

export const root = resolve(import.meta.dirname, '../..');

/**
 * Wraps an adapter and records the SQL text of every statement while `recording.on` is true: the
 * seam where SQL leaves the engine, for both the user's transaction and the engine's own.
 */
export function recordingAdapter<A extends DatabaseAdapter>(
  adapter: A,
): { adapter: A; texts: string[]; recording: { on: boolean } } {
  const texts: string[] = [];
  const recording = { on: false };
  const note = (query: SqlQuery): void => {
    if (recording.on) texts.push(query.text);
  };
  const wrapped = {
    ...adapter,
    executeInTransaction(tx: unknown, query: SqlQuery) {
      note(query);
      return adapter.executeInTransaction(tx, query);
    },
    execute(query: SqlQuery) {
      note(query);
      return adapter.execute(query);
    },
    executeAtomically(queries: readonly SqlQuery[]) {
      queries.forEach(note);
      return adapter.executeAtomically(queries);
    },
  } as unknown as A;
  return { adapter: wrapped, texts, recording };
}

/** The code of an outboxer error, or a description of anything else that was thrown. */
export function codeOf(error: unknown): ErrorCode | string {
  if (isOutboxerError(error)) return error.code;
  return `not an OutboxerError: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`;
}

/** Runs a TypeScript file of test/reliability/processes in a child process; resolves with its exit and output. */
export function runProcess(
  script: string,
  args: string[],
  timeout = 60_000,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string }> {
  return new Promise((done) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', resolve(import.meta.dirname, 'processes', script), ...args],
      { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeout);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      done({ code, signal, output });
    });
  });
}

/**
 * An instance relaying `orders` (two partitions, `notify`, a relay that accepts everything, short
 * lease and shutdown timeouts) whose pool reaches the fixture's schema through a FaultProxy: for
 * the tests that make the database hang or refuse connections.
 */
export async function relayingBehindProxy(schema: string) {
  const proxy = new FaultProxy(Number(new URL(DATABASE_URL).port || 5432));
  await proxy.listen();
  const url = new URL(DATABASE_URL);
  url.host = `127.0.0.1:${proxy.port}`;
  const pool = new pg.Pool({ connectionString: url.toString(), options: `-c search_path=${schema}`, max: 6 });
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined)); // finding 1
  const outboxer = new Outboxer({
    database: nodePostgres(pool),
    leaseTimeout: 1000,
    shutdownTimeout: 1000,
    outboxes: {
      orders: { notify: true, partitions: 2, pollInterval: 20, relay: functionRelay(async () => undefined) },
    },
  });
  return { proxy, pool, outboxer };
}
