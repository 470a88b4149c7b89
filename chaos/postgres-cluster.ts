/**
 * A throwaway PostgreSQL cluster for fault injection: `initdb` into a temporary directory, listen
 * on a free port of 127.0.0.1 only, start, restart, freeze and stop it with `pg_ctl`, remove it at
 * the end. The chaos harness restarts and cuts *this* server, never the shared one on 5432.
 *
 * As root, every server command runs as the `postgres` OS user (`runuser -u postgres --`), which
 * owns the directory; as another user, as that user.
 */
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ChaosServer } from './database.js';
import { freePort, idsOf, tailOf } from './server-tools.js';

const run = promisify(execFile);

/** Where Debian keeps the server binaries; `PG_BIN` overrides. */
export function postgresBinDir(): string {
  if (process.env.PG_BIN) return process.env.PG_BIN;
  for (const version of [17, 16, 15, 14, 13]) {
    const dir = `/usr/lib/postgresql/${version}/bin`;
    if (existsSync(join(dir, 'initdb'))) return dir;
  }
  try {
    return execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error('PostgreSQL server binaries not found: install postgresql or set PG_BIN');
  }
}

export interface ClusterOptions {
  /** Shown in file names and logs. */
  name: string;
  /** Extra `postgresql.conf` lines. */
  settings?: Record<string, string | number>;
}

export class PostgresCluster implements ChaosServer {
  readonly dir: string;
  readonly dataDir: string;
  readonly logFile: string;
  port = 0;
  private readonly bin = postgresBinDir();
  private readonly asRoot = userInfo().uid === 0;
  private running = false;

  constructor(private readonly options: ClusterOptions) {
    this.dir = mkdtempSync(join(tmpdir(), `outboxer-chaos-${options.name}-`));
    this.dataDir = join(this.dir, 'data');
    this.logFile = join(this.dir, 'postgres.log');
  }

  /** `postgres://postgres@127.0.0.1:<port>/<database>` */
  url(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  private command(tool: string, args: string[]): [string, string[]] {
    const path = join(this.bin, tool);
    return this.asRoot ? ['runuser', ['-u', 'postgres', '--', path, ...args]] : [path, args];
  }

  private async exec(tool: string, args: string[]): Promise<string> {
    const [file, argv] = this.command(tool, args);
    try {
      const { stdout } = await run(file, argv, { encoding: 'utf8', timeout: 120_000 });
      return stdout;
    } catch (error) {
      const e = error as { stderr?: string; message: string };
      throw new Error(`${tool} ${args.join(' ')} failed: ${e.stderr ?? e.message}\n${tailOf(this.logFile)}`);
    }
  }

  /** initdb, configure, start. */
  async create(): Promise<void> {
    if (this.asRoot) {
      const { uid, gid } = idsOf('postgres');
      chownSync(this.dir, uid, gid);
    }
    await this.exec('initdb', [
      '-D',
      this.dataDir,
      '-A',
      'trust',
      '-U',
      'postgres',
      '--no-sync',
      '-E',
      'UTF8',
    ]);
    this.port = await freePort();
    const settings: Record<string, string | number> = {
      listen_addresses: "'127.0.0.1'",
      port: this.port,
      unix_socket_directories: `'${this.dir}'`,
      max_connections: 300,
      shared_buffers: "'128MB'",
      // The faults kill processes, never the kernel: the page cache survives them, so skipping
      // fsync loses nothing here and spares the shared machine's disk. synchronous_commit stays on.
      fsync: 'off',
      full_page_writes: 'off',
      logging_collector: 'off',
      log_min_messages: 'warning',
      ...this.options.settings,
    };
    const conf = Object.entries(settings)
      .map(([k, v]) => `${k} = ${v}`)
      .join('\n');
    writeFileSync(join(this.dataDir, 'postgresql.conf'), `\n# chaos harness\n${conf}\n`, { flag: 'a' });
    await this.start();
  }

  async start(): Promise<void> {
    await this.exec('pg_ctl', ['-D', this.dataDir, '-l', this.logFile, '-w', '-t', '60', 'start']);
    this.running = true;
  }

  /** `pg_ctl restart -m fast`: every connection is cut, the server is back when this returns. */
  async restart(): Promise<void> {
    await this.exec('pg_ctl', [
      '-D',
      this.dataDir,
      '-l',
      this.logFile,
      '-m',
      'fast',
      '-w',
      '-t',
      '60',
      'restart',
    ]);
    this.running = true;
  }

  /** `pg_ctl stop -m immediate`, then start: a crash, recovered from WAL. */
  async crash(): Promise<void> {
    await this.stop('immediate');
    await this.start();
  }

  async stop(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    if (!this.running) return;
    await this.exec('pg_ctl', ['-D', this.dataDir, '-m', mode, '-w', '-t', '60', 'stop']);
    this.running = false;
  }

  /** Pids of the postmaster and every child (backends, background processes). */
  pids(): number[] {
    try {
      const postmaster = Number(readFileSync(join(this.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
      const children = spawnSync('pgrep', ['-P', String(postmaster)], { encoding: 'utf8' })
        .stdout.split('\n')
        .filter(Boolean)
        .map(Number);
      return [postmaster, ...children];
    } catch {
      return [];
    }
  }

  /** SIGSTOP (`frozen`) or SIGCONT every server process: a hung server, connections stay open. */
  freeze(frozen: boolean): void {
    for (const pid of this.pids()) {
      try {
        process.kill(pid, frozen ? 'SIGSTOP' : 'SIGCONT');
      } catch {
        // Gone meanwhile.
      }
    }
  }

  async createDatabase(name: string): Promise<void> {
    await this.exec('createdb', ['-h', '127.0.0.1', '-p', String(this.port), '-U', 'postgres', name]);
  }

  /** Synchronous, for exit handlers: stop immediately and remove the directory. */
  destroySync(): void {
    if (existsSync(join(this.dataDir, 'postmaster.pid'))) {
      this.freeze(false);
      const [file, argv] = this.command('pg_ctl', ['-D', this.dataDir, '-m', 'immediate', '-w', 'stop']);
      spawnSync(file, argv, { stdio: 'ignore', timeout: 60_000 });
    }
    this.running = false;
    rmSync(this.dir, { recursive: true, force: true });
  }
}
