/**
 * Scale-out (`BENCH_ONLY=scaleout`, Postgres): relaying processes (bench/scale-out-child.ts, each
 * a pool of 4 and `notify: true`) sharing the 32 partitions of one outbox.
 *
 * - Throughput of 1, 2, 4 and 8 processes draining one backlog: from the moment every process is
 *   told to start until the last message is delivered (start-up and the spreading of the
 *   partitions included).
 * - Hand-over, two processes: how long until the partitions are spread evenly after a second
 *   process joins one that holds them all; how long until the other process holds every partition
 *   after `stop()` is called on one (goal: under 100 ms with `notify`); and after a SIGKILL
 *   (bounded by the lease: it lapses `leaseTimeout` after its last renewal, and the survivor,
 *   which saw it miss its renewals, steps just after that).
 *
 * Who holds what is read from the lease table every few milliseconds.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Outboxer } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { addRow, judge, type BenchContext } from './context.js';
import { dropTables, fill, vacuum, type PostgresBench } from './postgres.js';
import { formatMs } from './report.js';
import { rows, sleep } from './support.js';

const TABLE = 'bench_scale_out';
const PARTITIONS = 32;
const root = fileURLToPath(new URL('..', import.meta.url));

interface ChildMessage {
  readonly type: 'ready' | 'started' | 'progress' | 'stopped';
  readonly delivered?: number;
}

/** A relaying child process and what it reported. */
class Relayer {
  delivered = 0;
  private readonly seen = new Set<string>();
  private readonly waiters: Array<{ type: string; resolve: () => void }> = [];
  private constructor(
    readonly nodeId: string,
    private readonly child: ChildProcess,
  ) {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      let message: ChildMessage;
      try {
        message = JSON.parse(line) as ChildMessage;
      } catch {
        return;
      }
      if (message.delivered !== undefined) this.delivered = message.delivered;
      this.seen.add(message.type);
      for (const waiter of this.waiters.filter((w) => w.type === message.type)) waiter.resolve();
    });
  }

  static async spawn(
    ctx: BenchContext<PostgresBench>,
    nodeId: string,
    leaseTimeout: number,
  ): Promise<Relayer> {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', fileURLToPath(new URL('./scale-out-child.ts', import.meta.url))],
      {
        cwd: root,
        env: {
          ...process.env,
          BENCH_CHILD_URL: ctx.settings.url,
          BENCH_CHILD_TABLE: TABLE,
          BENCH_CHILD_PARTITIONS: String(PARTITIONS),
          BENCH_CHILD_LEASE: String(leaseTimeout),
          BENCH_CHILD_NODE: nodeId,
        },
        stdio: ['pipe', 'pipe', 'inherit'],
      },
    );
    child.stdin!.on('error', () => undefined); // an order to a process already gone
    const relayer = new Relayer(nodeId, child);
    await relayer.reported('ready');
    return relayer;
  }

  reported(type: ChildMessage['type']): Promise<void> {
    if (this.seen.has(type)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.waiters.push({ type, resolve });
      this.child.once('exit', (code) => {
        if (!this.seen.has(type)) reject(new Error(`${this.nodeId} exited (${code}) before "${type}"`));
      });
    });
  }

  order(command: 'go' | 'stop'): void {
    this.child.stdin!.write(`${command}\n`);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.order('stop');
    await this.reported('stopped');
  }

  kill(): void {
    this.child.kill('SIGKILL');
  }
}

/** Live leases by owner. */
async function holders(ctx: BenchContext<PostgresBench>): Promise<Map<string, number>> {
  const { rows: found } = await ctx.db.pool.query<{ owner: string; n: number }>(
    `SELECT owner, count(*)::int AS n FROM "${TABLE}_leases" WHERE lease_until > now() GROUP BY owner`,
  );
  return new Map(found.map((r) => [r.owner, r.n]));
}

/** Milliseconds from now until `check` holds on the lease table, read every 5 ms. */
async function until(
  ctx: BenchContext<PostgresBench>,
  check: (held: Map<string, number>) => boolean,
  limit: number,
): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < limit) {
    if (check(await holders(ctx))) return performance.now() - started;
    await sleep(5);
  }
  throw new Error(`the partitions did not move within ${limit} ms`);
}

async function freshTable(ctx: BenchContext<PostgresBench>): Promise<void> {
  await dropTables(ctx.db.pool, TABLE);
  await new Outboxer({
    database: nodePostgres(ctx.db.pool),
    relay: false,
    outboxes: { bench: { table: TABLE, partitions: PARTITIONS } },
  }).migrate();
}

async function throughput(
  ctx: BenchContext<PostgresBench>,
  processes: number,
  count: number,
): Promise<number> {
  const { pool } = ctx.db;
  await freshTable(ctx);
  await fill(pool, { table: TABLE, outbox: 'bench', count, groups: 10_000, partitions: PARTITIONS });
  await vacuum(pool, TABLE);
  const relayers: Relayer[] = [];
  try {
    relayers.push(
      ...(await Promise.all(
        Array.from({ length: processes }, (_, i) => Relayer.spawn(ctx, `relayer-${i}`, 30_000)),
      )),
    );
    const started = performance.now();
    for (const r of relayers) r.order('go');
    while (relayers.reduce((sum, r) => sum + r.delivered, 0) < count) await sleep(10);
    const seconds = (performance.now() - started) / 1000;
    return count / seconds;
  } finally {
    await Promise.all(relayers.map((r) => r.stop()));
  }
}

export async function scaleOutRows(ctx: BenchContext<PostgresBench>): Promise<void> {
  const count = rows(ctx.settings, 200_000, 2_000);
  const rates: Array<[number, number]> = [];
  // A smoke run checks that the group completes: two counts of processes are enough.
  for (const processes of ctx.settings.quick ? [1, 2] : [1, 2, 4, 8]) {
    const rate = await throughput(ctx, processes, count);
    rates.push([processes, rate]);
    ctx.log(`  ${processes} process(es): ${Math.round(rate)} msg/s`);
  }
  const one = rates[0]![1];
  addRow(ctx, {
    group: 'Scale-out',
    what: `Relay throughput, ${rates.map(([n]) => n).join(' / ')} processes sharing ${PARTITIONS} partitions (${count.toLocaleString('en-US')} messages)`,
    ours: {
      value: rates[rates.length - 1]![1],
      unit: 'msg/s',
      text: rates.map(([, r]) => Math.round(r).toLocaleString('en-US')).join(' / ') + ' msg/s',
    },
    note: `Relative to one process: ${rates.map(([n, r]) => `${n}: ${(r / one).toFixed(2)}×`).join(', ')}. Each process a pool of 4, batchSize 100, \`notify: true\`, a relay that only counts; timed from the order to start (start-up and the spreading of the partitions included) to the last delivery. The processes, the database server and other work share ${'the machine’s'} cores: once they are busy, more processes add only contention.`,
  });

  // Hand-over, on an idle outbox: the default lease in full runs (a SIGKILL waits for it).
  const lease = ctx.settings.quick ? 3000 : 30_000;
  await freshTable(ctx);
  const relayers: Relayer[] = [];
  try {
    const [a, b, c] = (await Promise.all(
      ['relayer-a', 'relayer-b', 'relayer-c'].map((id) => Relayer.spawn(ctx, id, lease)),
    )) as [Relayer, Relayer, Relayer];
    relayers.push(a, b, c);
    a.order('go');
    await until(ctx, (held) => held.get('relayer-a') === PARTITIONS, 30_000);
    await sleep(500);
    b.order('go');
    const joinMs = await until(
      ctx,
      (held) => held.get('relayer-a') === PARTITIONS / 2 && held.get('relayer-b') === PARTITIONS / 2,
      2 * lease,
    );
    await sleep(500);
    // From the call, and from the first reading that shows a partition free (handed back, not yet
    // taken): how long the partitions stay idle.
    let freeAt: number | undefined;
    const stopping = a.stop();
    const called = performance.now();
    await until(
      ctx,
      (held) => {
        const holding = [...held.values()].reduce((sum, n) => sum + n, 0);
        if (holding < PARTITIONS) freeAt ??= performance.now();
        return held.get('relayer-b') === PARTITIONS;
      },
      2 * lease,
    );
    const stopMs = performance.now() - called;
    const idleMs = performance.now() - (freeAt ?? called);
    await stopping;
    c.order('go');
    await until(
      ctx,
      (held) => held.get('relayer-b') === PARTITIONS / 2 && held.get('relayer-c') === PARTITIONS / 2,
      2 * lease,
    );
    await sleep(500);
    b.kill();
    const killMs = await until(ctx, (held) => held.get('relayer-c') === PARTITIONS, 3 * lease);
    addRow(ctx, {
      group: 'Scale-out',
      what: 'A second process joins one holding all 32 partitions: until they are spread 16 / 16',
      ours: { value: joinMs, unit: 'ms' },
      note: `\`notify: true\`: the joining node's first heartbeat sends a rebalance notification; the other hands back its surplus, which sends another. Measured from the order to start (the joining process's start-up included).`,
    });
    addRow(ctx, {
      group: 'Scale-out',
      what: '`stop()` on one of two processes: how long its partitions stay free before the other takes them',
      ours: { value: idleMs, unit: 'ms' },
      target: { text: '< 100 ms', measured: `${formatMs(idleMs)} ms`, met: judge(ctx, idleMs < 100) },
      note: `From the first reading of the lease table (every 5 ms) that shows a partition handed back and not yet taken, until it shows the survivor holding all 32; ${formatMs(stopMs)} ms from the call to \`stop()\` (sent to the child process on its stdin; it finishes its batches, hands its 16 leases back and leaves in one statement with a rebalance notification; the survivor then runs a heartbeat and takes the 16 in one statement).`,
    });
    addRow(ctx, {
      group: 'Scale-out',
      what: `SIGKILL of one of two processes (leaseTimeout ${lease / 1000} s): until the other holds every partition`,
      ours: { value: killMs, unit: 'ms' },
      target: {
        text: `≤ leaseTimeout + 1 s (${formatMs(lease + 1000)} ms)`,
        measured: `${formatMs(killMs)} ms`,
        met: judge(ctx, killMs <= lease + 1000),
      },
      note: 'The leases lapse leaseTimeout after their last renewal (a heartbeat every third of it; here the survivor’s join had the killed process renew just before the kill, the worst case), and the survivor, which saw them miss their renewals, steps just after they lapse. The second covers the steps and the readings of a loaded machine.',
    });
  } finally {
    await Promise.all(relayers.map((r) => r.stop().catch(() => undefined)));
    await dropTables(ctx.db.pool, TABLE);
  }
}
