/**
 * `npx outboxer …` as a child process (node --import tsx src/cli/index.ts), as the CLI tests run
 * it: with `DATABASE_URL` set (or not), and on a real terminal when a prompt must be answered.
 */
import { execFile, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { expect } from 'vitest';

const root = resolve(import.meta.dirname, '../..');
const entry = ['--import', 'tsx', 'src/cli/index.ts'];

export interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI with `DATABASE_URL` (or none) and stdin not a terminal. */
export function cli(args: string[], url: string | undefined): Promise<Result> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.DATABASE_URL;
  if (url !== undefined) env.DATABASE_URL = url;
  return new Promise((done) => {
    const child = execFile(
      process.execPath,
      [...entry, ...args],
      { cwd: root, env },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 99;
        done({ code, stdout, stderr });
      },
    );
    child.stdin?.end();
  });
}

/**
 * Runs the CLI on a pseudo-terminal (script(1)) and types `answer` at its prompt. stdout and
 * stderr arrive merged, as on a screen.
 */
export function cliOnTerminal(
  args: string[],
  url: string,
  answer: string,
): Promise<{ code: number; screen: string }> {
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const command = [process.execPath, ...entry, ...args].map(quote).join(' ');
  return new Promise((done, fail) => {
    const child = spawn('script', ['-qec', command, '/dev/null'], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: url },
    });
    let screen = '';
    let answered = false;
    child.stdout.on('data', (chunk: Buffer) => {
      screen += chunk.toString('utf8');
      if (!answered && screen.includes('[y/N]')) {
        answered = true;
        child.stdin.write(`${answer}\r`);
      }
    });
    child.stderr.on('data', (chunk: Buffer) => (screen += chunk.toString('utf8')));
    child.on('error', fail);
    child.on('exit', (code) => done({ code: code ?? 99, screen }));
  });
}

/** The JSON on stdout of a run that succeeded without an error message. */
export function parse<T = unknown>(result: Result): T {
  expect(result.stderr === '' || !result.stderr.includes('outboxer:'), result.stderr).toBe(true);
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as T;
}
