/** Helpers of the reliability tests. */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import type { DatabaseAdapter, ErrorCode, SqlQuery } from 'outboxer';
import { isOutboxerError } from 'outboxer';

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
