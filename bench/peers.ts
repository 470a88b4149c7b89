/**
 * The libraries users pick instead, doing the same publish and deliver work in the same run:
 * pg-boss (a job queue that takes the caller's transaction, bench/pg-boss-peer.ts) and
 * pg-transactional-outbox (an outbox with a polling listener). This file sets the peers up
 * (outboxer and pg-transactional-outbox here), runs the publish rows (bench/peers-publish.ts), which
 * alternate the three libraries trial by trial, then the delivery rows (bench/peers-deliver.ts).
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { Outboxer } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import type { BenchContext } from './context.js';
import { deliverFigure, GROUPS, randomKey, type Peer } from './peer.js';
import { deliverRows } from './peers-deliver.js';
import { publishReferences, publishRows } from './peers-publish.js';
import { pgBossPeer } from './pg-boss-peer.js';
import { dropTables, type PostgresBench } from './postgres.js';
import { payload, sleep, sqlPayload } from './support.js';

const OURS = 'bench_peer_pub';
const PTXO_SCHEMA = 'bench_ptxo';
/** The version this row was written against; install it as a devDependency to run the row. */
export const PTXO_PACKAGE = 'pg-transactional-outbox@0.5.7';

// ---------------------------------------------------------------------------------------------
// outboxer

async function outboxerPeer(ctx: BenchContext<PostgresBench>): Promise<Peer> {
  await dropTables(ctx.db.pool, OURS);
  const outboxer = new Outboxer({
    database: nodePostgres(ctx.db.pool),
    relay: false,
    outboxes: { bench: { table: OURS } },
  }) as unknown as Outboxer<pg.PoolClient>;
  await outboxer.migrate();
  return {
    name: 'outboxer',
    publisher: {
      one: (client, n) => outboxer.publish(client, 'bench', payload(n), { groupKey: randomKey() }),
      hundred: (client, n) =>
        outboxer.publishMany(
          client,
          Array.from({ length: 100 }, (_, i) => ({
            outbox: 'bench',
            payload: payload(n * 100 + i),
            groupKey: randomKey(),
          })),
        ),
      reset: async () => void (await ctx.db.pool.query(`TRUNCATE "${OURS}"`)),
    },
    close: () => dropTables(ctx.db.pool, OURS),
  };
}

// ---------------------------------------------------------------------------------------------
// pg-transactional-outbox 0.5: initializeMessageStorage in the caller's transaction; the polling
// listener (its next_outbox_messages function, created by the library's own setup SQL) delivers.

interface PtxoModule {
  initializeMessageStorage(
    config: unknown,
    logger: unknown,
  ): (message: unknown, client: unknown) => Promise<void>;
  initializePollingMessageListener(
    config: unknown,
    handler: { handle(message: unknown): Promise<void> },
    logger: unknown,
    strategies?: { batchSizeStrategy?: () => Promise<number> },
  ): [() => Promise<void>];
  DatabaseSetup?: Record<string, (config: unknown) => string>;
  DatabaseSetupExporter?: { createPollingScript?(config: unknown): string };
}

const silentLogger: Record<string, unknown> = {
  level: 'silent',
  trace() {},
  debug() {},
  info() {},
  warn() {},
  error() {},
  fatal() {},
  child: () => silentLogger,
};

async function ptxoPeer(ctx: BenchContext<PostgresBench>): Promise<Peer> {
  const specifier = 'pg-transactional-outbox';
  let mod: PtxoModule;
  try {
    mod = (await import(specifier)) as PtxoModule;
    if (typeof mod.initializeMessageStorage !== 'function' && 'default' in mod)
      mod = (mod as unknown as { default: PtxoModule }).default;
  } catch {
    return {
      name: 'pg-transactional-outbox',
      unavailable: `not installed: npm i -D ${PTXO_PACKAGE}`,
      close: async () => undefined,
    };
  }
  const setupConfig = {
    outboxOrInbox: 'outbox',
    database: new URL(ctx.settings.url).pathname.slice(1),
    schema: PTXO_SCHEMA,
    table: 'outbox',
    listenerRole: 'postgres',
    handlerRole: 'postgres',
    nextMessagesName: 'next_outbox_messages',
  };
  await ctx.db.pool.query(`DROP SCHEMA IF EXISTS ${PTXO_SCHEMA} CASCADE`);
  const setup = mod.DatabaseSetup;
  const script =
    setup?.dropAndCreateTable && setup.createPollingFunction && setup.setupPollingIndexes
      ? [
          setup.dropAndCreateTable(setupConfig),
          setup.createPollingFunction(setupConfig),
          setup.setupPollingIndexes(setupConfig),
        ].join('\n')
      : mod.DatabaseSetupExporter?.createPollingScript?.(setupConfig);
  if (script === undefined) throw new Error('pg-transactional-outbox: no DatabaseSetup to create its table');
  await ctx.db.pool.query(script);
  const settings = {
    dbSchema: PTXO_SCHEMA,
    dbTable: 'outbox',
    nextMessagesFunctionSchema: PTXO_SCHEMA, // without it, the listener looks in `public`
    nextMessagesFunctionName: 'next_outbox_messages',
    nextMessagesBatchSize: 100,
    nextMessagesPollingIntervalInMs: 10,
  };
  const config = {
    outboxOrInbox: 'outbox',
    dbListenerConfig: { connectionString: ctx.settings.url },
    settings,
  };
  const store = mod.initializeMessageStorage(config, silentLogger);
  const message = (n: number) => {
    const key = randomKey();
    return {
      id: randomUUID(),
      aggregateType: 'order',
      aggregateId: key,
      messageType: 'order_created',
      segment: key,
      concurrency: 'sequential',
      payload: payload(n),
      createdAt: new Date().toISOString(),
    };
  };
  return {
    name: 'pg-transactional-outbox',
    publisher: {
      one: (client, n) => store(message(n), client),
      hundred: async (client, n) => {
        // Its storage takes one message per call: 100 INSERTs in the transaction.
        for (let i = 0; i < 100; i += 1) await store(message(n * 100 + i), client);
      },
      reset: async () => void (await ctx.db.pool.query(`TRUNCATE ${PTXO_SCHEMA}.outbox`)),
    },
    async relay(count, capMs) {
      await ctx.db.pool.query(`TRUNCATE ${PTXO_SCHEMA}.outbox`);
      await ctx.db.pool.query(
        `INSERT INTO ${PTXO_SCHEMA}.outbox (id, aggregate_type, aggregate_id, message_type, segment, concurrency, payload, created_at)
         SELECT gen_random_uuid(), 'order', 'order:' || (g % $2), 'order_created', 'order:' || (g % $2), 'sequential', ${sqlPayload('g')}::jsonb, clock_timestamp()
         FROM generate_series(1, $1::int) AS g`,
        [count, GROUPS],
      );
      await ctx.db.pool.query(`VACUUM (ANALYZE) ${PTXO_SCHEMA}.outbox`);
      let delivered = 0;
      const started = performance.now();
      const [shutdown] = mod.initializePollingMessageListener(
        config,
        {
          handle: async () => {
            delivered += 1;
          },
        },
        silentLogger,
        // Its default takes one message per poll for the first `batchSize` polls (a guard against
        // poison messages at start-up); full batches from the first poll are its fastest path.
        { batchSizeStrategy: () => Promise.resolve(100) },
      );
      while (delivered < count && performance.now() - started < capMs) await sleep(20);
      const figure = deliverFigure(delivered, count, started, capMs);
      await shutdown();
      return figure;
    },
    close: async () => void (await ctx.db.pool.query(`DROP SCHEMA IF EXISTS ${PTXO_SCHEMA} CASCADE`)),
  };
}

// ---------------------------------------------------------------------------------------------

async function safely(ctx: BenchContext, name: string, make: () => Promise<Peer>): Promise<Peer> {
  try {
    return await make();
  } catch (error) {
    ctx.log(`  ${name} could not be set up: ${String(error)}`);
    return {
      name,
      unavailable: `failed to set up: ${String(error).slice(0, 160)}`,
      close: async () => undefined,
    };
  }
}

export async function peerRows(ctx: BenchContext<PostgresBench>): Promise<void> {
  const { settings } = ctx;
  // Single-message rows are bound by the commit's flush, whose pace wanders on a shared machine:
  // many short alternating trials, compared trial by trial.
  const trials = settings.quick ? 1 : 7;
  const all = [
    await safely(ctx, 'outboxer', () => outboxerPeer(ctx)),
    await safely(ctx, 'pg-boss', () => pgBossPeer(ctx)),
    await safely(ctx, 'pg-transactional-outbox', () => ptxoPeer(ctx)),
  ];
  // The references take their turn in the single-message trials; they are not peers.
  const references = await publishReferences(ctx);
  try {
    await publishRows(ctx, all, references, trials);
    await deliverRows(ctx, all);
  } finally {
    for (const peer of [...all, ...references])
      await peer.close().catch((error: unknown) => ctx.log(`  closing ${peer.name}: ${String(error)}`));
  }
  ctx.report.notes.push(
    `Peers: publish rows alternate outboxer, pg-boss and pg-transactional-outbox trial by trial (${trials} trials; figures are medians, ratios the medians of per-trial ratios), each library publishing inside the caller's transaction on the same pool. Two references take their turn in the single-message rows, with the same harness (BEGIN, one statement, COMMIT, on the same pool): the plain one-row INSERT of outboxer's row into an identical table, and the floor, one integer into a table without indexes, the most any library can publish one message per transaction at here. pg-boss (12) delivers with fetch({ batchSize: 100 }) + complete() in a loop (its fastest path, a standard queue, no order); pg-transactional-outbox with its polling listener (batch 100 from the first poll, 10 ms interval). The deliver row's outboxer figure is the "Relay, 1 partition, batchSize: 100" row of this run. In the row in order per key, pg-boss's jobs are on a key_strict_fifo queue (the only pg-boss 12 queue that keeps a key's order across workers, docs/relays/pg-boss.md), inserted as outboxer's pg-boss relay inserts them (the group key as singletonKey, ordered job ids), and 4 loops of fetch({ batchSize: 100 }) + complete() deliver them, each fetch taking at most one job per key; outboxer's figure is the "Relay, 4 partitions" row of this run (ordering 'group'). pg-transactional-outbox is pinned to ${PTXO_PACKAGE}.`,
  );
}
