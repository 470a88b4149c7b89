/**
 * `npm run chaos`: the fault-injection run. See docs/reliability.md.
 *
 * Starts two throwaway servers (the application's database, which the faults restart, crash, cut
 * and freeze: Postgres, or MariaDB with CHAOS_DB=mysql; and the destination's, always a Postgres
 * cluster, reached through a fault proxy), a Kafka topic when a broker answers on
 * 127.0.0.1:9092, three relay processes and several publisher processes; plays the fault schedule
 * drawn from the seed; stops the publishers, waits for the outbox to drain, stops the relays, runs
 * the checker, prints its table, and exits non-zero on any violation.
 *
 * Environment: CHAOS_DB (postgres; mysql = MariaDB through outboxer/mysql2), CHAOS_SECONDS (120),
 * CHAOS_SEED (random), CHAOS_RATE (messages/s, 600), CHAOS_POISON (share of the dead-letter
 * outboxes' messages that are poison, 0.003), CHAOS_PUBLISHERS (3), CHAOS_WRITERS (2 per
 * publisher), CHAOS_KAFKA (auto; 0 = off), CHAOS_DRAIN_TIMEOUT (seconds, 300), CHAOS_OUT (run
 * directory, .tmp/chaos/<time>-<seed>), CHAOS_KEEP=1 (leave the servers and the topic behind).
 *
 * CHAOS_BROKER=kafka|rabbitmq adds the inbox's end-to-end proof (broker.ts, inbox-check.ts): a
 * broker of the run's own, an outbox relayed to it by outboxer's relay, consumer processes that
 * handle it through the inbox into an effects table, and their faults (consumer kills, broker
 * pauses).
 *
 * This file runs the phases in order; each lives in its own file: run-settings.ts (environment,
 * run directory, code snapshot), run-servers.ts (server start-up), run-children.ts (the child
 * processes), fault-player.ts and operator.ts (the fault phase), drain.ts (the drain and the
 * stops), final-check.ts (the checker and the report).
 */
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chaosDatabase, databaseKind } from './database.js';
import { drainConsumers, stopPublishersAndDrain, stopRelaysAndConsumers, tallyDriftOf } from './drain.js';
import { FaultPlayer } from './fault-player.js';
import { finalCheck } from './final-check.js';
import { startOperator } from './operator.js';
import { RunChildren } from './run-children.js';
import { status, type RunContext } from './run-context.js';
import { cleanUpOnExit, prepareServers, runServers } from './run-servers.js';
import { runSettings } from './run-settings.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const database = chaosDatabase(databaseKind());
const settings = runSettings(root);
const { seed, seconds, rate, publisherCount, writers, runDir, drainTimeout, keep, log } = settings;

const children = new RunChildren(settings);
const servers = runServers(database, seed);
cleanUpOnExit(settings, servers, () => children.killAll());

log(
  `${database.label}, seed ${seed}, ${seconds} s, ${rate} messages/s, ${publisherCount} publishers x ${writers} writers, run dir ${runDir}`,
);
const prepared = await prepareServers(settings, servers);
const ctx: RunContext = { settings, servers, prepared, children };
await children.start(database.kind, prepared, servers.broker !== undefined);

// The fault phase, with the operator deciding about parked messages until the outbox drained.
const player = new FaultPlayer(ctx);
const operator = startOperator(ctx);
const statusTimer = setInterval(() => void status(ctx).then(log), seconds <= 120 ? 10_000 : 30_000);
await player.play();
const lastFaultEnd = player.lastFaultEnd;

const drained = await stopPublishersAndDrain(ctx);
clearInterval(statusTimer);
await operator.stop();
log(
  drained.drainedAt === undefined
    ? `NOT DRAINED after ${drainTimeout / 1000} s (${await status(ctx)})`
    : `drained`,
);
const tallyDrift = await tallyDriftOf(ctx);
const effectsDrained = await drainConsumers(ctx);
log(tallyDrift.length === 0 ? 'counts(): the tallies equal the rows' : `counts(): ${tallyDrift.join('; ')}`);
await stopRelaysAndConsumers(ctx);

const found = await finalCheck(ctx, {
  ...drained,
  faults: player.faults,
  lastFaultEnd,
  tallyDrift,
  effectsDrained,
});

const { kafkaAdmin, topic } = prepared;
if (kafkaAdmin !== undefined && topic !== undefined) {
  if (!keep) await kafkaAdmin.deleteTopics({ topics: [topic] }).catch(() => undefined);
  await kafkaAdmin.disconnect().catch(() => undefined);
}
children.killAll();
if (!keep)
  await Promise.all([
    servers.app.stop('immediate').catch(() => undefined),
    servers.sink.stop('immediate').catch(() => undefined),
  ]);
log(found.length === 0 ? 'PASS' : `FAIL: ${found.join('; ')}`);
process.exit(found.length === 0 ? 0 : 1);
