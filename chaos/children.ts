/**
 * The chaos run's children (relays, publishers, consumers): each role a {@link Slot} that starts
 * its process, watches its output for `ready` and JSON summaries, and starts it again after an
 * exit unless the harness no longer wants it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { join } from 'node:path';
import type { ChildEnvironment, ControlMessage } from './config.js';
import { sleep } from './random.js';

/** What every slot of a run shares. */
export interface SlotContext {
  /** The snapshot of the code the children run. */
  readonly codeRoot: string;
  readonly runDir: string;
  /** Every child process still running, for the exit handler. */
  readonly children: Set<ChildProcess>;
  /** Every exit, in order. */
  readonly exits: Exit[];
}

/** How a child ended. */
export interface Exit {
  label: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  at: number;
}

/** One child role (r1, p2, c1…): its current process, started again after each exit while desired. */
export class Slot {
  child: ChildProcess | undefined;
  label = '';
  incarnation = -1;
  desired = true;
  restartDelay = 1000;
  /** Said 'ready' (its signal handlers and IPC listener are in place). */
  isReady = false;
  ready: Promise<void> = Promise.resolve();
  summary: string[] = [];
  private exited: Promise<Exit> = Promise.resolve({ label: '', code: 0, signal: null, at: 0 });

  constructor(
    readonly name: string,
    private readonly script: string,
    private readonly args: () => string[],
    private readonly env: ChildEnvironment,
    private readonly context: SlotContext,
  ) {}

  get alive(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  start(): void {
    this.incarnation += 1;
    this.label = `${this.name}.${this.incarnation}`;
    const label = this.label;
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(this.context.codeRoot, 'chaos', 'processes', this.script),
        label,
        ...this.args(),
      ],
      {
        cwd: this.context.codeRoot,
        env: { ...process.env, CHAOS_ENV: JSON.stringify(this.env) },
        stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      },
    );
    this.child = child;
    this.isReady = false;
    this.context.children.add(child);
    const out = createWriteStream(join(this.context.runDir, `${label}.log`));
    child.stderr!.pipe(out);
    let buffer = '';
    this.summary = [];
    this.ready = new Promise((resolveReady) => {
      child.stdout!.on('data', (chunk: Buffer) => {
        out.write(chunk);
        buffer += chunk.toString();
        const lines = buffer.split('\n');
        buffer = lines.pop()!;
        for (const line of lines) {
          if (line === 'ready') {
            this.isReady = true;
            resolveReady();
          } else if (line.startsWith('{')) this.summary.push(line);
        }
      });
      child.once('exit', () => resolveReady());
    });
    this.exited = new Promise((resolveExit) => {
      child.once('exit', (code, signal) => {
        this.context.children.delete(child);
        const exit = { label, code, signal, at: Date.now() };
        this.context.exits.push(exit);
        resolveExit(exit);
        if (this.desired) {
          const delay = this.restartDelay;
          this.restartDelay = 1000;
          setTimeout(() => {
            if (this.desired && !this.alive) this.start();
          }, delay);
        }
      });
    });
  }

  send(message: ControlMessage): void {
    if (this.alive) this.child!.send(message, () => undefined);
  }

  signal(signal: NodeJS.Signals): void {
    if (this.alive) this.child!.kill(signal);
  }

  /** Resolves with the exit, or undefined after `ms`. */
  async waitExit(ms: number): Promise<Exit | undefined> {
    if (!this.alive) return this.exited;
    return Promise.race([this.exited, sleep(ms).then(() => undefined)]);
  }
}

/** SIGKILL (after SIGCONT, for a paused one) of every child still running. */
export function killAll(children: ReadonlySet<ChildProcess>): void {
  for (const child of children) {
    try {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    } catch {
      // gone
    }
  }
}
