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
 */
import type { ChildProcess } from 'node:child_process';
import {
  appendFileSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { Socket } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kafka, logLevel } from 'kafkajs';
import { Outboxer } from 'outboxer';
import { Slot, killAll, type Exit, type SlotContext } from './children.js';
import { BROKER_CONSUMERS, brokerKind, chaosBroker, type BrokerEnvironment } from './broker.js';
import { check, violations, type FaultRecord } from './checker.js';
import {
  GROUPS_PER_OUTBOX,
  INSTANCE_NAME,
  OPERATOR_LOG,
  OUTBOX_TABLE,
  STOP_BOUND,
  activeModes,
  groupKey,
  outboxOptions,
  type ChaosPayload,
  type ChildEnvironment,
  type ControlMessage,
  type OperatorAction,
} from './config.js';
import { chaosDatabase, databaseKind } from './database.js';
import {
  BROKER_FAULT_KINDS,
  FAULT_KINDS,
  faultDescriptions,
  faultSchedule,
  type ScheduledFault,
} from './faults.js';
import { FaultProxy } from './fault-proxy.js';
import {
  CONSUMER_DATABASE,
  checkInbox,
  effectCount,
  inboxViolations,
  prepareConsumerDatabase,
  type InboxReport,
} from './inbox-check.js';
import { PostgresCluster } from './postgres-cluster.js';
import { postgresDatabase } from './postgres-database.js';
import { random, sleep } from './random.js';
import { valueRows } from './sql.js';
import { formatReport, type RunReport } from './report.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');
const database = chaosDatabase(databaseKind());
const seconds = Number(process.env.CHAOS_SECONDS ?? 120);
const seed = Number(process.env.CHAOS_SEED ?? Math.floor(Math.random() * 1_000_000));
const rate = Number(process.env.CHAOS_RATE ?? 600);
const poison = Number(process.env.CHAOS_POISON ?? 0.003);
const publisherCount = Number(process.env.CHAOS_PUBLISHERS ?? 3);
const writers = Number(process.env.CHAOS_WRITERS ?? 2);
const drainTimeout = Number(process.env.CHAOS_DRAIN_TIMEOUT ?? 300) * 1000;
const keep = process.env.CHAOS_KEEP === '1';
const runDir = resolve(
  process.env.CHAOS_OUT ??
    join(root, '.tmp', 'chaos', `${new Date().toISOString().replace(/[:.]/g, '-')}-seed${seed}`),
);
mkdirSync(runDir, { recursive: true });

// The children run a snapshot of the code taken now: a relay started again half an hour later must
// run the same engine as the others, whatever happens to the working tree meanwhile.
const codeRoot = process.env.CHAOS_SNAPSHOT === '0' ? root : join(runDir, 'code');
if (codeRoot !== root) {
  for (const dir of ['src', 'chaos']) cpSync(join(root, dir), join(codeRoot, dir), { recursive: true });
  for (const file of ['tsconfig.json', 'package.json']) copyFileSync(join(root, file), join(codeRoot, file));
  symlinkSync(join(root, 'node_modules'), join(codeRoot, 'node_modules'), 'dir');
}
const rnd = random(seed);
const t0 = Date.now();
const log = (text: string): void => {
  const line = `[chaos +${((Date.now() - t0) / 1000).toFixed(1)}s] ${text}`;
  console.log(line);
  appendFileSync(join(runDir, 'harness.log'), line + '\n');
};

// ---------------------------------------------------------------------------------------------
// Children

const allChildren = new Set<ChildProcess>();
const exits: Exit[] = [];
const slotContext: SlotContext = { codeRoot, runDir, children: allChildren, exits };
const killAllChildren = (): void => killAll(allChildren);
const stops: Array<{
  label: string;
  stopMs: number | null;
  exitMs: number;
  code: number | null;
  loopMaxMs?: number;
}> = [];

// ---------------------------------------------------------------------------------------------
// Setup

const app = database.server('app');
const sink = new PostgresCluster({ name: 'sink' });
const brokerType = brokerKind();
const broker = brokerType === undefined ? undefined : chaosBroker(brokerType, seed);
let kafkaAdmin: ReturnType<Kafka['admin']> | undefined;
let topic: string | undefined;

function cleanupSync(): void {
  killAllChildren();
  // The outbox server's own log (its deadlocks, its crash recoveries) stays with the run.
  if (existsSync(app.logFile)) copyFileSync(app.logFile, join(runDir, `${database.kind}-server.log`));
  if (broker !== undefined && existsSync(broker.logFile))
    copyFileSync(broker.logFile, join(runDir, `${broker.kind}-server.log`));
  if (!keep) {
    app.destroySync();
    sink.destroySync();
    broker?.destroySync();
  }
}
process.on('exit', cleanupSync);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    log(`${signal}: stopping`);
    process.exit(130);
  });
}

async function kafkaAvailable(): Promise<boolean> {
  if (process.env.CHAOS_KAFKA === '0') return false;
  return new Promise((resolveProbe) => {
    const socket = new Socket();
    const done = (ok: boolean): void => {
      socket.destroy();
      resolveProbe(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.connect(9092, '127.0.0.1', () => done(true));
  });
}

/** A statement on the outbox's database, on a connection of its own (`?` placeholders). */
const query = database.queryOnce;
/** A statement on the destination's database (Postgres). */
const querySink = postgresDatabase.queryOnce;

log(
  `${database.label}, seed ${seed}, ${seconds} s, ${rate} messages/s, ${publisherCount} publishers x ${writers} writers, run dir ${runDir}`,
);
await Promise.all([app.create(), sink.create(), broker?.create(BROKER_CONSUMERS)]);
await Promise.all([app.createDatabase('chaos_app'), sink.createDatabase('chaos_sink')]);
const appUrl = app.url('chaos_app');
const sinkUrl = sink.url('chaos_sink');
// The consumer's database lives on the outbox's server when that is Postgres, so that the
// database faults hit the inbox too; beside MariaDB it is the destination's Postgres.
const consumerServer = database.kind === 'postgres' ? app : sink;
let brokerEnv: BrokerEnvironment | null = null;
if (broker !== undefined) {
  await consumerServer.createDatabase(CONSUMER_DATABASE);
  await prepareConsumerDatabase(consumerServer.url(CONSUMER_DATABASE));
  brokerEnv = broker.environment(consumerServer.url(CONSUMER_DATABASE));
  log(`${broker.label}: ${brokerEnv.url}, consumers' database ${brokerEnv.consumerUrl}`);
}
log(
  `outbox database (${database.label}) on 127.0.0.1:${app.port}, destination database on 127.0.0.1:${sink.port}`,
);

let kafka: ChildEnvironment['kafka'] = null;
if (await kafkaAvailable()) {
  try {
    const client = new Kafka({
      clientId: 'chaos-harness',
      brokers: ['127.0.0.1:9092'],
      logLevel: logLevel.NOTHING,
    });
    kafkaAdmin = client.admin();
    await kafkaAdmin.connect();
    topic = `outboxer-chaos-${seed}-${Date.now().toString(36)}`;
    await kafkaAdmin.createTopics({
      topics: [{ topic, numPartitions: 4, replicationFactor: 1 }],
      waitForLeaders: true,
    });
    kafka = { brokers: ['127.0.0.1:9092'], topic };
    log(`Kafka topic ${topic}`);
  } catch (error) {
    log(`Kafka answers but the topic could not be created (${String(error)}): running without Kafka`);
    kafka = null;
  }
} else log('no Kafka on 127.0.0.1:9092: running without it');

const modes = activeModes(kafka !== null, database.notifications, brokerType);
const brokerOutbox = modes.find((m) => m.destination === 'broker');
for (const ddl of database.tables) await query(appUrl, ddl);
const orderIds = modes.flatMap((m) =>
  Array.from({ length: GROUPS_PER_OUTBOX }, (_, i) => groupKey(m.name, i)),
);
await query(appUrl, `INSERT INTO orders (id) VALUES ${valueRows(orderIds.length, 1)}`, orderIds);
await querySink(
  sinkUrl,
  `CREATE TABLE deliveries (seq bigserial PRIMARY KEY, outbox text NOT NULL, message_id bigint NOT NULL, group_key text,
     group_seq bigint NOT NULL, node text NOT NULL, attempts int NOT NULL, hash text NOT NULL,
     at timestamptz NOT NULL DEFAULT clock_timestamp())`,
);
{
  const pool = database.pool(appUrl, { max: 2, name: 'harness' });
  const admin = new Outboxer({
    database: pool.adapter,
    name: INSTANCE_NAME,
    relay: false,
    outboxes: Object.fromEntries(modes.map((m) => [m.name, outboxOptions(m)])),
  });
  await admin.migrate();
  await pool.end();
}

const proxy = new FaultProxy(sink.port);
await proxy.listen();
const childEnv = (extra: Partial<ChildEnvironment> = {}): ChildEnvironment => ({
  db: database.kind,
  appUrl,
  sinkUrl: `postgres://postgres@127.0.0.1:${proxy.port}/chaos_sink`,
  kafka,
  broker: brokerEnv,
  runDir,
  seed,
  rate: rate / publisherCount,
  poison,
  writers,
  ...extra,
});

const relays = ['r1', 'r2', 'r3'].map(
  (name) => new Slot(name, 'relay.ts', () => [], childEnv(), slotContext),
);
let publisherSeed = seed;
const publishers = Array.from(
  { length: publisherCount },
  (_, i) =>
    new Slot(`p${i + 1}`, 'publisher.ts', () => [String((publisherSeed += 7919))], childEnv(), slotContext),
);
const consumers = Array.from(
  { length: broker === undefined ? 0 : BROKER_CONSUMERS },
  (_, i) => new Slot(`c${i + 1}`, 'consumer.ts', () => [String(i)], childEnv(), slotContext),
);
for (const slot of [...relays, ...consumers]) slot.start();
await Promise.all([...relays, ...consumers].map((s) => s.ready));
log(consumers.length > 0 ? 'relays and consumers ready' : 'relays ready');
for (const slot of publishers) slot.start();
await Promise.all(publishers.map((s) => s.ready));
log('publishers ready: the fault phase starts');

// ---------------------------------------------------------------------------------------------
// Faults

const faults: FaultRecord[] = [];
const schedule = faultSchedule(
  seed,
  seconds,
  broker === undefined ? FAULT_KINDS : [...FAULT_KINDS, ...BROKER_FAULT_KINDS],
);
writeFileSync(join(runDir, 'schedule.json'), JSON.stringify(schedule, null, 2));
const running = new Set<Promise<void>>();

function liveSlot(slots: readonly Slot[], index: number): Slot | undefined {
  const alive = slots.filter((s) => s.alive && s.isReady);
  return alive.length === 0 ? undefined : alive[index % alive.length];
}

function recordFault(fault: FaultRecord): void {
  faults.push(fault);
  appendFileSync(join(runDir, 'faults.jsonl'), JSON.stringify(fault) + '\n');
  log(
    `fault ${fault.kind}${fault.target ? ` on ${fault.target}` : ''} (${fault.end - fault.start} ms)${fault.detail ? `: ${fault.detail}` : ''}`,
  );
}

async function killAndWait(
  slot: Slot,
  how: 'SIGKILL' | ControlMessage,
  ms: number,
): Promise<string | undefined> {
  slot.restartDelay = rnd.int(500, 3000);
  if (how === 'SIGKILL') slot.signal('SIGKILL');
  else slot.send(how);
  const exit = await slot.waitExit(ms);
  if (exit === undefined) {
    slot.signal('SIGKILL');
    await slot.waitExit(10_000);
    return `it did not die by itself within ${ms} ms; SIGKILLed`;
  }
  return undefined;
}

async function destination(mode: 'up' | 'down' | 'slow', delayMs = 0): Promise<void> {
  proxy.set(mode, delayMs);
  for (const slot of relays) slot.send({ type: 'destination', mode, delayMs });
}

/**
 * Waits up to `ms` for a child of `slots` to be alive and ready. On a loaded machine every relay
 * can be restarting when a fault falls due; skipping the fault would leave its kind unplayed.
 */
async function waitForLiveSlot(slots: readonly Slot[], ms = 20_000): Promise<void> {
  const until = Date.now() + ms;
  while (!slots.some((s) => s.alive && s.isReady) && Date.now() < until) await sleep(100);
}

async function inject(fault: ScheduledFault): Promise<void> {
  if (fault.kind.startsWith('relay-')) await waitForLiveSlot(relays);
  if (fault.kind.startsWith('publisher-')) await waitForLiveSlot(publishers);
  if (fault.kind.startsWith('consumer-')) await waitForLiveSlot(consumers);
  const start = Date.now();
  let target: string | undefined;
  let detail: string | undefined;
  switch (fault.kind) {
    case 'relay-sigkill-mid-batch':
    case 'relay-sigkill': {
      const slot = liveSlot(relays, fault.target);
      if (slot === undefined) return;
      target = slot.label;
      detail = await killAndWait(
        slot,
        fault.kind === 'relay-sigkill' ? 'SIGKILL' : { type: 'kill', when: 'mid-batch' },
        15_000,
      );
      break;
    }
    case 'relay-sigterm': {
      const slot = liveSlot(relays, fault.target);
      if (slot === undefined) return;
      target = slot.label;
      slot.restartDelay = rnd.int(500, 3000);
      slot.signal('SIGTERM');
      const exit = await slot.waitExit(STOP_BOUND + 20_000);
      const exitMs = Date.now() - start;
      const summary = slot.summary
        .map((s) => JSON.parse(s) as { stopMs?: number; loopMaxMs?: number })
        .find((s) => s.stopMs !== undefined);
      stops.push({
        label: target,
        stopMs: summary?.stopMs ?? null,
        exitMs,
        code: exit?.code ?? null,
        loopMaxMs: summary?.loopMaxMs,
      });
      detail =
        exit === undefined
          ? `still running after ${exitMs} ms: SIGKILLed`
          : `stop() took ${summary?.stopMs ?? '?'} ms, exit code ${exit.code}`;
      if (exit === undefined) {
        slot.signal('SIGKILL');
        await slot.waitExit(10_000);
      }
      break;
    }
    case 'relay-pause': {
      const slot = liveSlot(relays, fault.target);
      if (slot === undefined) return;
      target = slot.label;
      slot.signal('SIGSTOP');
      await sleep(fault.duration);
      slot.signal('SIGCONT');
      break;
    }
    case 'db-restart':
      await app.restart();
      break;
    case 'db-crash':
      await app.crash();
      break;
    case 'db-terminate':
      detail = `${await database.terminateConnections(appUrl)} connections cut`;
      break;
    case 'db-freeze':
      app.freeze(true);
      await sleep(fault.duration);
      app.freeze(false);
      break;
    case 'destination-down':
      await destination('down');
      await sleep(fault.duration);
      await destination('up');
      break;
    case 'destination-slow':
      await destination('slow', fault.delayMs);
      await sleep(fault.duration);
      await destination('up');
      detail = `+${fault.delayMs} ms per packet`;
      break;
    case 'publisher-kill-before-commit':
    case 'publisher-kill-after-commit':
    case 'publisher-sigkill': {
      const slot = liveSlot(publishers, fault.target);
      if (slot === undefined) return;
      target = slot.label;
      const how: 'SIGKILL' | ControlMessage =
        fault.kind === 'publisher-sigkill'
          ? 'SIGKILL'
          : {
              type: 'kill',
              when: fault.kind === 'publisher-kill-before-commit' ? 'before-commit' : 'after-commit',
            };
      detail = await killAndWait(slot, how, 15_000);
      break;
    }
    case 'consumer-sigkill':
    case 'consumer-kill-after-commit': {
      const slot = liveSlot(consumers, fault.target);
      if (slot === undefined) return;
      target = slot.label;
      detail = await killAndWait(
        slot,
        fault.kind === 'consumer-sigkill' ? 'SIGKILL' : { type: 'kill', when: 'after-commit' },
        15_000,
      );
      break;
    }
    case 'broker-pause':
      broker?.pause(true);
      await sleep(fault.duration);
      broker?.pause(false);
      break;
  }
  recordFault({ kind: fault.kind, target, start, end: Date.now(), detail });
}

async function status(): Promise<string> {
  try {
    const pending = await query<{ outbox: string; pending: number | string }>(
      appUrl,
      `SELECT outbox, sum(CASE WHEN status < 3 THEN 1 ELSE 0 END) AS pending FROM ${OUTBOX_TABLE} GROUP BY outbox ORDER BY outbox`,
    );
    const [published] = await query<{ n: number | string }>(appUrl, `SELECT count(*) AS n FROM published`);
    const [delivered] = await querySink<{ n: number }>(
      sinkUrl,
      `SELECT coalesce(max(seq), 0)::int AS n FROM deliveries`,
    );
    const effects = brokerEnv === null ? '' : `, effects ${await effectCount(brokerEnv.consumerUrl)}`;
    return `committed ${published?.n}, sink rows ${delivered?.n}${effects}, pending ${pending.map((p) => `${p.outbox}=${Number(p.pending)}`).join(' ')}, relays ${relays.filter((s) => s.alive).length}/3, publishers ${publishers.filter((s) => s.alive).length}/${publishers.length}`;
  } catch (error) {
    return `status unavailable (${(error as Error).message})`;
  }
}

// ---------------------------------------------------------------------------------------------
// The operator: decides about the dead messages of the outboxes that park them, as a person on
// call would, while relays drain and faults play: a poison message is discarded (the messages
// its group held go out after it, in order), any other is revived with retryDead. It runs until
// the outbox has drained, since a parked group holds its later messages until then.

const operatorRandom = random(seed + 1);
let operating = true;

async function operate(): Promise<void> {
  const parking = modes.filter((m) => m.onDead === 'park');
  if (parking.length === 0) return;
  // A connection cut by a fault is replaced by the pool: the next call reconnects.
  const pool = database.pool(appUrl, { max: 2, name: 'operator' });
  const operator = new Outboxer({
    database: pool.adapter,
    name: INSTANCE_NAME,
    relay: false,
    outboxes: Object.fromEntries(parking.map((m) => [m.name, outboxOptions(m)])),
  });
  try {
    while (operating) {
      await sleep(operatorRandom.int(300, 1500));
      for (const mode of parking) {
        try {
          for (const message of await operator.listDead(mode.name, { limit: 100 })) {
            const poison = (message.payload as ChaosPayload).poison === true;
            const done = poison
              ? await operator.discard(mode.name, [message.id])
              : await operator.retryDead(mode.name, { ids: [message.id] });
            if (done === 0) continue;
            const action: OperatorAction = {
              action: poison ? 'discard' : 'retry',
              outbox: mode.name,
              id: message.id,
              at: Date.now(),
            };
            appendFileSync(join(runDir, OPERATOR_LOG), JSON.stringify(action) + '\n');
          }
        } catch {
          // The database is down, restarting or frozen: decide at the next round.
        }
      }
    }
  } finally {
    await pool.end().catch(() => undefined);
  }
}

const operating$ = operate();
const phaseStart = Date.now();
const statusTimer = setInterval(() => void status().then(log), seconds <= 120 ? 10_000 : 30_000);
for (const fault of schedule) {
  const wait = phaseStart + fault.at - Date.now();
  if (wait > 0) await sleep(wait);
  const promise: Promise<void> = inject(fault)
    .catch((error: unknown) => log(`fault ${fault.kind} failed to inject: ${String(error)}`))
    .finally(() => running.delete(promise));
  running.add(promise);
}
const phaseEnd = phaseStart + seconds * 1000;
if (phaseEnd > Date.now()) await sleep(phaseEnd - Date.now());
await Promise.all([...running]);
const lastFaultEnd = Math.max(...faults.map((f) => f.end), phaseStart);

// ---------------------------------------------------------------------------------------------
// Drain, stop, check

log('fault phase over: stopping the publishers');
for (const slot of publishers) slot.desired = false;
await Promise.all(
  publishers.map(async (slot) => {
    slot.signal('SIGTERM');
    if ((await slot.waitExit(30_000)) === undefined) slot.signal('SIGKILL');
  }),
);
const publishersStopped = Date.now();
// Relays restarted by a fault may still be on their way: wait for all three.
const relaysBack = Date.now();
while (relays.some((s) => !s.alive) && Date.now() - relaysBack < 30_000) await sleep(200);
await Promise.all(relays.map((s) => s.ready));
log(`publishers stopped; waiting for the outbox to drain (${await status()})`);

let drainedAt: number | undefined;
while (Date.now() - publishersStopped < drainTimeout) {
  try {
    const [row] = await query<{ pending: number | string }>(
      appUrl,
      `SELECT count(*) AS pending FROM ${OUTBOX_TABLE} WHERE status < 3`,
    );
    if (row !== undefined && Number(row.pending) === 0) {
      drainedAt = Date.now();
      break;
    }
  } catch {
    // keep waiting
  }
  await sleep(250);
}
clearInterval(statusTimer);
operating = false;
await operating$;
log(drainedAt === undefined ? `NOT DRAINED after ${drainTimeout / 1000} s (${await status()})` : `drained`);
const tallyDrift = await tallyDriftOf(appUrl);
const effectsDrained = await drainConsumers();
log(tallyDrift.length === 0 ? 'counts(): the tallies equal the rows' : `counts(): ${tallyDrift.join('; ')}`);

log('stopping the relays');
for (const slot of relays) slot.desired = false;
await Promise.all(
  relays.map(async (slot) => {
    const label = slot.label;
    const started = Date.now();
    slot.signal('SIGTERM');
    const exit = await slot.waitExit(STOP_BOUND + 20_000);
    const summary = slot.summary
      .map((s) => JSON.parse(s) as { stopMs?: number; loopMaxMs?: number })
      .find((s) => s.stopMs !== undefined);
    stops.push({
      label,
      stopMs: summary?.stopMs ?? null,
      exitMs: Date.now() - started,
      code: exit?.code ?? null,
      loopMaxMs: summary?.loopMaxMs,
    });
    if (exit === undefined) slot.signal('SIGKILL');
  }),
);
await proxy.close();
for (const slot of consumers) slot.desired = false;
await Promise.all(
  consumers.map(async (slot) => {
    slot.signal('SIGTERM');
    if ((await slot.waitExit(30_000)) === undefined) slot.signal('SIGKILL');
  }),
);

log('checking');
const result = await check({
  database,
  appUrl,
  sinkUrl,
  kafka,
  runDir,
  // The broker outbox is proven at its consumers, by checkInbox below.
  modes: modes.filter((m) => m.destination !== 'broker'),
  faults,
  table: OUTBOX_TABLE,
});
writeFileSync(join(runDir, 'check.json'), JSON.stringify(result, null, 2)); // kept whatever happens next
// Figures for the report only: slow on a big run, and never worth failing it.
const transactions = await query<{ n: number | string }>(
  appUrl,
  `SELECT count(*) AS n FROM (SELECT DISTINCT publisher, at FROM published) AS t`,
  [],
  300_000,
).then(
  ([row]) => Number(row?.n ?? 0),
  () => -1,
);
const duringOutages = await Promise.all(
  faults
    .filter((f) => f.kind === 'destination-down')
    .map(async (f) => {
      const [row] = await query<{ n: number | string }>(
        appUrl,
        `SELECT count(*) AS n FROM published WHERE at BETWEEN ? AND ?`,
        [new Date(f.start), new Date(f.end)],
        300_000,
      ).catch(() => [{ n: -1 }]);
      return Number(row?.n ?? 0);
    }),
);
const found = violations(result);
let inbox: InboxReport | undefined;
if (broker !== undefined && brokerOutbox !== undefined && brokerEnv !== null) {
  inbox = await checkInbox({
    database,
    appUrl,
    consumerUrl: brokerEnv.consumerUrl,
    runDir,
    mode: brokerOutbox,
    broker,
    consumerExits: exits.filter((e) => e.label.startsWith('c')).length,
  });
  found.push(...inboxViolations(inbox));
  if (!effectsDrained) found.push(`the consumers did not catch up within ${drainTimeout / 1000} s`);
}
// A child that exited by itself with an error crashed: 0 is a graceful stop, 3 a relay whose
// start() failed while the database was down (it is started again), signals are the harness's.
const crashes = exits.filter((e) => e.signal === null && e.code !== 0 && e.code !== 3);
if (crashes.length > 0)
  found.push(
    `${crashes.length} processes crashed: ${crashes.map((e) => `${e.label} (exit ${e.code})`).join(', ')}`,
  );
if (drainedAt === undefined) found.push(`the outbox did not drain within ${drainTimeout / 1000} s`);
if (tallyDrift.length > 0) found.push(`counts() differs from the rows: ${tallyDrift.join('; ')}`);
const overBound = stops.filter((s) => s.code !== 0 || s.exitMs > STOP_BOUND);
if (overBound.length > 0)
  found.push(
    `${overBound.length} graceful stops over ${STOP_BOUND} ms or failed: ${overBound.map((s) => `${s.label} ${s.exitMs} ms code ${s.code}`).join(', ')}`,
  );

const report: RunReport = {
  database: database.label,
  seed,
  seconds,
  rate,
  startedAt: new Date(t0).toISOString(),
  wallSeconds: Math.round((Date.now() - t0) / 1000),
  kafka: kafka !== null,
  faults,
  descriptions: faultDescriptions(database),
  result,
  drainAfterLastFaultMs: drainedAt === undefined ? null : drainedAt - lastFaultEnd,
  drainAfterPublishersMs: drainedAt === undefined ? null : drainedAt - publishersStopped,
  stops,
  publisherExits: exits.filter((e) => e.label.startsWith('p')).length,
  relayExits: exits.filter((e) => e.label.startsWith('r')).length,
  crashes: crashes.map((e) => `${e.label} exit ${e.code}`),
  startFailures: exits.filter((e) => e.code === 3).length,
  commitsDuringOutages: duringOutages,
  transactions,
  tallyDrift,
  inbox,
  violations: found,
};
writeFileSync(join(runDir, 'report.json'), JSON.stringify(report, null, 2));
const text = formatReport(report);
writeFileSync(join(runDir, 'report.md'), text);
console.log('\n' + text);

if (kafkaAdmin !== undefined && topic !== undefined) {
  if (!keep) await kafkaAdmin.deleteTopics({ topics: [topic] }).catch(() => undefined);
  await kafkaAdmin.disconnect().catch(() => undefined);
}
killAllChildren();
if (!keep)
  await Promise.all([
    app.stop('immediate').catch(() => undefined),
    sink.stop('immediate').catch(() => undefined),
  ]);
log(found.length === 0 ? 'PASS' : `FAIL: ${found.join('; ')}`);
process.exit(found.length === 0 ? 0 : 1);

/**
 * Where the figures `counts()` sums (the tallies every statement writes with its change, through
 * crashes and failovers) differ from the rows, per outbox: none expected.
 */
async function tallyDriftOf(url: string): Promise<string[]> {
  let counted, tallied;
  try {
    counted = await query<Figures>(
      url,
      `SELECT outbox, sum(CASE WHEN status < 3 THEN 1 ELSE 0 END) AS pending,
         sum(CASE WHEN status = 3 THEN 1 ELSE 0 END) AS dead, sum(CASE WHEN status = 4 THEN 1 ELSE 0 END) AS delivered
       FROM ${OUTBOX_TABLE} GROUP BY outbox`,
    );
    tallied = await query<Figures>(
      url,
      `SELECT outbox, sum(pending) AS pending, sum(dead) AS dead, sum(delivered) AS delivered
       FROM ${OUTBOX_TABLE}_tallies GROUP BY outbox`,
    );
  } catch (error) {
    return [`could not compare them: ${String(error)}`];
  }
  const text = (rows: Figures[], outbox: string): string => {
    const row = rows.find((r) => r.outbox === outbox);
    return [row?.pending, row?.dead, row?.delivered].map((n) => Number(n ?? 0)).join('/');
  };
  return [...new Set([...counted, ...tallied].map((r) => r.outbox))]
    .filter((outbox) => text(counted, outbox) !== text(tallied, outbox))
    .map(
      (outbox) =>
        `${outbox}: rows ${text(counted, outbox)} (pending/dead/delivered), tallies ${text(tallied, outbox)}`,
    );
}

/**
 * Waits until the consumers have an effect for every message committed into the broker outbox
 * (or the drain timeout), since the outbox drained only into the broker. True when they caught up.
 */
async function drainConsumers(): Promise<boolean> {
  if (brokerEnv === null || brokerOutbox === undefined) return true;
  const started = Date.now();
  const [row] = await query<{ n: number | string }>(
    appUrl,
    `SELECT count(*) AS n FROM published WHERE outbox = ?`,
    [brokerOutbox.name],
  );
  const committed = Number(row?.n ?? 0);
  while (Date.now() - started < drainTimeout) {
    if (((await effectCount(brokerEnv.consumerUrl)) ?? -1) >= committed) {
      log(`the consumers caught up: ${committed} effects`);
      return true;
    }
    await sleep(500);
  }
  log(`the consumers did not catch up (${await effectCount(brokerEnv.consumerUrl)} effects of ${committed})`);
  return false;
}

/** Sums as the driver gives them: bigint or decimal text, or numbers. */
interface Figures {
  [column: string]: unknown;
  outbox: string;
  pending: string | number | null;
  dead: string | number | null;
  delivered: string | number | null;
}
