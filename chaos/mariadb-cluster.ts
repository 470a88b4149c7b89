/**
 * A throwaway MariaDB server for fault injection, the counterpart of postgres-cluster.ts:
 * `mariadb-install-db` into a temporary directory, `mariadbd` on a free port of 127.0.0.1 only
 * (and a socket in that directory), restarted, killed and frozen by the harness, removed at the
 * end. The shared server on 3306 is never touched.
 *
 * Every server command gets `--no-defaults` first, so nothing of the machine's my.cnf (its port,
 * socket or data directory) reaches the throwaway server. As root, the server runs as the `mysql`
 * OS user (`--user=mysql`), which owns the directory; as another user, as that user.
 */
import { execFile, spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import mysql from 'mysql2/promise';
import type { ChaosServer } from './database.js';
import { freePort, idsOf, tailOf } from './server-tools.js';
import { sleep } from './random.js';

const run = promisify(execFile);

/** Where Debian keeps `mariadbd`; `MARIADB_BIN` overrides (a directory holding it). */
function serverBinary(): string {
  const candidates = [
    ...(process.env.MARIADB_BIN ? [join(process.env.MARIADB_BIN, 'mariadbd')] : []),
    '/usr/sbin/mariadbd',
    '/usr/bin/mariadbd',
    '/usr/local/bin/mariadbd',
  ];
  const found = candidates.find((path) => existsSync(path));
  if (found === undefined)
    throw new Error('mariadbd not found: install mariadb-server or set MARIADB_BIN to its directory');
  return found;
}

export class MariadbCluster implements ChaosServer {
  readonly dir: string;
  readonly dataDir: string;
  readonly logFile: string;
  port = 0;
  private readonly bin = serverBinary();
  private readonly asRoot = userInfo().uid === 0;
  private pid: number | undefined;
  /**
   * Stops and starts, one at a time: faults overlap, and a restart that began while a crash was
   * starting the server again would start a second server on the same data directory.
   */
  private lifecycle: Promise<unknown> = Promise.resolve();

  private serially<T>(work: () => Promise<T>): Promise<T> {
    const next = this.lifecycle.then(work, work);
    this.lifecycle = next.catch(() => undefined);
    return next;
  }

  constructor(private readonly options: { name: string }) {
    this.dir = mkdtempSync(join(tmpdir(), `outboxer-chaos-${options.name}-`));
    this.dataDir = join(this.dir, 'data');
    this.logFile = join(this.dir, 'mariadb.log');
  }

  /** `mysql://root@127.0.0.1:<port>/<database>` */
  url(database = 'mysql'): string {
    return `mysql://root@127.0.0.1:${this.port}/${database}`;
  }

  /** mariadb-install-db, then start. */
  async create(): Promise<void> {
    if (this.asRoot) {
      const { uid, gid } = idsOf('mysql');
      chownSync(this.dir, uid, gid);
    }
    const args = [
      '--no-defaults',
      `--datadir=${this.dataDir}`,
      // root with an empty password over TCP, like the shared server; no test database.
      '--auth-root-authentication-method=normal',
      '--skip-test-db',
      ...(this.asRoot ? ['--user=mysql'] : []),
    ];
    try {
      await run('mariadb-install-db', args, { encoding: 'utf8', timeout: 120_000 });
    } catch (error) {
      const e = error as { stderr?: string; message: string };
      throw new Error(`mariadb-install-db failed: ${e.stderr ?? e.message}`);
    }
    this.port = await freePort();
    await this.start();
  }

  start(): Promise<void> {
    return this.serially(() => this.spawnServer());
  }

  private async spawnServer(): Promise<void> {
    const child = spawn(
      this.bin,
      [
        '--no-defaults',
        `--datadir=${this.dataDir}`,
        `--port=${this.port}`,
        '--bind-address=127.0.0.1',
        `--socket=${join(this.dir, 'sock')}`,
        `--pid-file=${join(this.dir, 'mariadbd.pid')}`,
        `--log-error=${this.logFile}`,
        ...(this.asRoot ? ['--user=mysql'] : []),
        '--character-set-server=utf8mb4',
        '--collation-server=utf8mb4_bin',
        '--max-connections=400',
        '--innodb-buffer-pool-size=128M',
        // The faults kill processes, never the kernel: a commit written to the page cache survives
        // them, so flushing the redo log once a second (not at every commit) loses nothing here and
        // spares the shared machine's disk, as fsync = off does for the Postgres clusters.
        '--innodb-flush-log-at-trx-commit=2',
        '--skip-log-bin',
        // Every deadlock InnoDB resolves goes to the server's log (copied into the run directory).
        '--innodb-print-all-deadlocks=ON',
      ],
      { detached: true, stdio: 'ignore' },
    );
    child.unref();
    this.pid = child.pid;
    let exited = false;
    child.once('exit', () => (exited = true));
    const until = Date.now() + 120_000;
    for (;;) {
      if (exited) throw new Error(`mariadbd exited at start\n${tailOf(this.logFile)}`);
      try {
        const connection = await mysql.createConnection({ uri: this.url(), connectTimeout: 2000 });
        await connection.query('SELECT 1');
        await connection.end();
        return;
      } catch (error) {
        if (Date.now() > until)
          throw new Error(`mariadbd did not answer: ${String(error)}\n${tailOf(this.logFile)}`);
      }
      await sleep(200);
    }
  }

  /** SIGTERM (a clean shutdown: every connection is cut), then start: back when this returns. */
  restart(): Promise<void> {
    return this.serially(async () => {
      await this.stopServer('fast');
      await this.spawnServer();
    });
  }

  /** kill -9 of the server, then start: InnoDB recovers from its redo log. */
  crash(): Promise<void> {
    return this.serially(async () => {
      await this.stopServer('immediate');
      await this.spawnServer();
    });
  }

  /** `fast`: SIGTERM, a clean shutdown; `immediate`: SIGKILL. Waits for the process to end. */
  stop(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    return this.serially(() => this.stopServer(mode));
  }

  private async stopServer(mode: 'fast' | 'immediate'): Promise<void> {
    const pid = this.pid;
    if (pid === undefined) return;
    this.freeze(false);
    signal(pid, mode === 'fast' ? 'SIGTERM' : 'SIGKILL');
    const until = Date.now() + 120_000;
    while (alive(pid)) {
      if (Date.now() > until) {
        signal(pid, 'SIGKILL');
        throw new Error(`mariadbd (pid ${pid}) did not stop\n${tailOf(this.logFile)}`);
      }
      await sleep(50);
    }
    this.pid = undefined;
  }

  /** SIGSTOP (`frozen`) or SIGCONT the server (one process): it hangs, its connections stay open. */
  freeze(frozen: boolean): void {
    if (this.pid !== undefined) signal(this.pid, frozen ? 'SIGSTOP' : 'SIGCONT');
  }

  async createDatabase(name: string): Promise<void> {
    const connection = await mysql.createConnection({ uri: this.url() });
    try {
      await connection.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`);
    } finally {
      await connection.end();
    }
  }

  /** Synchronous, for exit handlers: kill the server and remove the directory. */
  destroySync(): void {
    if (this.pid !== undefined) {
      signal(this.pid, 'SIGCONT');
      signal(this.pid, 'SIGKILL');
      const until = Date.now() + 10_000;
      while (alive(this.pid) && Date.now() < until) spawnSync('sleep', ['0.05']);
      this.pid = undefined;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Gone meanwhile.
  }
}

/** Alive and not a zombie waiting for its parent (the harness, which started it detached). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
