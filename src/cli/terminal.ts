/** The CLI's streams, the confirmation prompt and progress reports. */
import { createInterface } from 'node:readline';
import { count } from './format.js';
import { UsageError } from './usage-error.js';

/** Where the CLI reads and writes: the process's streams, or a test's. */
export interface CliIo {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly stdin: NodeJS.ReadableStream & { readonly isTTY?: boolean };
  readonly stdout: NodeJS.WritableStream & { readonly isTTY?: boolean };
  readonly stderr: NodeJS.WritableStream & { readonly isTTY?: boolean };
}

/**
 * Asks `question` on stderr and reads the answer from stdin: true only for "y" or "yes". Without
 * a terminal on stdin nobody can answer, so it refuses (exit code 2) and asks for --yes.
 */
export async function confirm(io: CliIo, question: string, action: string): Promise<boolean> {
  if (io.stdin.isTTY !== true) {
    throw new UsageError(
      `${action} asks for confirmation, and stdin is not a terminal: pass --yes to go ahead without asking.`,
    );
  }
  const lines = createInterface({ input: io.stdin, output: io.stderr, terminal: true });
  try {
    const answer = await new Promise<string | undefined>((resolve) => {
      lines.once('close', () => resolve(undefined)); // Ctrl-D
      lines.question(`${question} [y/N] `, resolve);
    });
    return answer !== undefined && /^\s*y(es)?\s*$/i.test(answer);
  } finally {
    lines.close();
  }
}

/**
 * Progress of a long operation on stderr: one line rewritten in place on a terminal, at most one
 * line a second otherwise (logs), and always the last one.
 */
export class Progress {
  private done = 0;
  private lastShown = -Infinity;
  private lastLine: string | undefined;

  constructor(
    private readonly io: CliIo,
    private readonly label: string,
    private readonly total: number | undefined,
    private readonly clock: () => number = Date.now,
  ) {}

  add(n: number): void {
    this.done += n;
    const now = this.clock();
    if (now - this.lastShown >= (this.io.stderr.isTTY ? 100 : 1000)) {
      this.lastShown = now;
      this.show(false);
    }
  }

  finish(): void {
    this.show(true);
  }

  get value(): number {
    return this.done;
  }

  private show(last: boolean): void {
    const of = this.total === undefined ? '' : ` of ${count(this.total)}`;
    const percent =
      this.total === undefined || this.total === 0
        ? ''
        : ` (${Math.min(100, Math.floor((this.done / this.total) * 100))}%)`;
    const line = `${this.label} ${count(this.done)}${of}${percent}`;
    if (this.io.stderr.isTTY) {
      this.io.stderr.write(`\r\x1b[K${line}${last ? '\n' : ''}`);
    } else if (!last || this.lastLine !== line) {
      this.io.stderr.write(`${line}\n`); // the last line only if it says something new
    }
    this.lastLine = line;
  }
}
