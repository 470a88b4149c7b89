/**
 * The peers' publish rows (part of the `peers` group): one message per transaction with 1 and 10
 * writers, and 100 messages per transaction, outboxer against pg-boss and pg-transactional-outbox
 * in trials that alternate the libraries. Two references take their turn in the single-message
 * trials: the plain INSERT of outboxer's row and the floor of a transaction that writes anything.
 */
import { Outboxer } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { addPeerRow, judge, type BenchContext } from './context.js';
import { transactionsPerSecond } from './database.js';
import { judgePeers, randomKey, type Peer, type Publisher } from './peer.js';
import { dropTables, type PostgresBench } from './postgres.js';
import { percent, type Figure, type PeerRow } from './report.js';
import { median, payload, rows } from './support.js';

const FLOOR = 'bench_floor';
const PLAIN = 'bench_peer_plain';

// ---------------------------------------------------------------------------------------------
// Two references beside the single-message rows. The plain INSERT of outboxer's row, by hand, into
// an identical table: what a library writing that row reaches. The floor: what a transaction that
// writes anything at all costs here (three round trips and the commit's flush); no library can
// publish one message per transaction faster, so a target above it is beyond reach on this machine.

async function plainPublisher(ctx: BenchContext<PostgresBench>): Promise<Publisher> {
  await dropTables(ctx.db.pool, PLAIN);
  await new Outboxer({
    database: nodePostgres(ctx.db.pool),
    relay: false,
    outboxes: { bench: { table: PLAIN } },
  }).migrate();
  const [insert] = ctx.db.plain.insert(PLAIN, []);
  return {
    one: (client, n) =>
      client.query(insert!.text, ['bench', 0, randomKey(), null, JSON.stringify(payload(n)), null]),
    reset: async () => void (await ctx.db.pool.query(`TRUNCATE "${PLAIN}"`)),
  };
}

async function floorPublisher(ctx: BenchContext<PostgresBench>): Promise<Publisher> {
  await ctx.db.pool.query(`DROP TABLE IF EXISTS ${FLOOR}`);
  await ctx.db.pool.query(`CREATE TABLE ${FLOOR} (n integer)`);
  return {
    one: (client, n) => client.query(`INSERT INTO ${FLOOR} (n) VALUES ($1)`, [n]),
    reset: async () => void (await ctx.db.pool.query(`TRUNCATE ${FLOOR}`)),
  };
}

/** The references of the single-message trials; they are not peers. */
export async function publishReferences(ctx: BenchContext<PostgresBench>): Promise<Peer[]> {
  const { pool } = ctx.db;
  return [
    { name: 'plain', publisher: await plainPublisher(ctx), close: () => dropTables(pool, PLAIN) },
    {
      name: 'floor',
      publisher: await floorPublisher(ctx),
      close: async () => void (await pool.query(`DROP TABLE IF EXISTS ${FLOOR}`)),
    },
  ];
}

/** The single-message rows' target: the plain INSERT of outboxer's row, and no peer ahead. */
const SINGLE_TARGET = "≥ 95% of the plain INSERT of outboxer's row and ≥ 1× the best peer";

/**
 * One message per transaction is bound by the commit: a peer near the floor leaves no room for 2×
 * it, so outboxer is judged against the plain INSERT of its own row (what any code writing that row
 * reaches) and against the fastest peer, each as the median of per-trial ratios.
 */
function judgeSingle(
  ctx: BenchContext<PostgresBench>,
  peers: PeerRow['peers'],
  pairedRatio: (name: string) => number | undefined,
): PeerRow['target'] {
  const plain = pairedRatio('plain');
  const measured = peers.filter((p) => p.figure !== undefined);
  if (plain === undefined || measured.length === 0)
    return { text: SINGLE_TARGET, measured: '–', met: undefined };
  const best = measured.reduce((a, b) => (a.figure!.value >= b.figure!.value ? a : b));
  const againstBest = pairedRatio(best.name)!;
  const floor = pairedRatio('floor');
  const ofFloor = floor === undefined ? '' : ` (the floor: ${percent(floor)})`;
  return {
    text: SINGLE_TARGET,
    measured: `${percent(plain)} of the plain INSERT${ofFloor}, ${againstBest.toFixed(2)}× ${best.name}`,
    met: measured.length < peers.length ? undefined : judge(ctx, plain >= 0.95 && againstBest >= 1),
  };
}

/** The publish rows, in trials that rotate who goes first among `all` and `references`. */
export async function publishRows(
  ctx: BenchContext<PostgresBench>,
  all: readonly Peer[],
  references: readonly Peer[],
  trials: number,
): Promise<void> {
  const { settings } = ctx;
  const { pool } = ctx.db;
  const publishCases = [
    {
      what: 'Publish, 1 message per transaction, 1 writer',
      writers: 1,
      count: rows(settings, 700, 30),
      hundred: false,
      unit: 'txn/s',
    },
    {
      what: 'Publish, 1 message per transaction, 10 writers',
      writers: 10,
      count: rows(settings, 4000, 100),
      hundred: false,
      unit: 'txn/s',
    },
    {
      what: 'Publish, 100 messages per transaction',
      writers: 1,
      count: rows(settings, 200, 5),
      hundred: true,
      unit: 'msg/s',
    },
  ];
  for (const c of publishCases) {
    const samples = new Map<string, number[]>();
    const failed = new Map<string, string>();
    for (let trial = 0; trial < trials; trial += 1) {
      // Rotate who goes first; the references take their turn where a transaction carries one message.
      const arms = [...all, ...references];
      const order = arms.map((_, i) => arms[(i + trial) % arms.length]!);
      for (const peer of order) {
        const { publisher } = peer;
        const body = c.hundred ? publisher?.hundred : publisher?.one;
        if (publisher === undefined || body === undefined || failed.has(peer.name)) continue;
        try {
          await publisher.reset();
          await pool.query('CHECKPOINT');
          const rate = await transactionsPerSecond(ctx.db, c.writers, c.count, ({ tx }, n) => body(tx, n));
          samples.set(peer.name, [...(samples.get(peer.name) ?? []), c.hundred ? rate * 100 : rate]);
        } catch (error) {
          failed.set(peer.name, `failed: ${String(error).slice(0, 160)}`);
        }
      }
    }
    const figure = (name: string): Figure | undefined => {
      const s = samples.get(name);
      return s === undefined ? undefined : { value: median(s), unit: c.unit };
    };
    const peers = all
      .filter((p) => p.name !== 'outboxer')
      .map((p) => ({ name: p.name, figure: figure(p.name), note: p.unavailable ?? failed.get(p.name) }));
    const ours = figure('outboxer');
    const floor = figure('floor');
    const plain = figure('plain');
    const pairedRatio = (name: string): number | undefined => {
      const mine = samples.get('outboxer') ?? [];
      const theirs = samples.get(name) ?? [];
      const both = Math.min(mine.length, theirs.length);
      return both === 0 ? undefined : median(mine.slice(0, both).map((value, i) => value / theirs[i]!));
    };
    addPeerRow(ctx, {
      what: c.what,
      ours,
      peers,
      floor,
      plain,
      target: c.hundred
        ? judgePeers(ctx, ours?.value, peers, {}, pairedRatio)
        : judgeSingle(ctx, peers, pairedRatio),
    });
    ctx.log(
      `  ${c.what}: outboxer ${ours?.value.toFixed(0)}; ${peers.map((p) => `${p.name} ${p.figure?.value.toFixed(0) ?? p.note}`).join('; ')}`,
    );
  }
}
