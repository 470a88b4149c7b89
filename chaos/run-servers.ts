/**
 * The chaos run's servers: the outbox's database, the destination's Postgres cluster behind its
 * fault proxy, the run's own broker (CHAOS_BROKER), a Kafka topic when a broker answers on
 * 127.0.0.1:9092; their tables and migrations, and their removal when the harness exits.
 */
import { copyFileSync, existsSync } from 'node:fs';
import { Socket } from 'node:net';
import { join } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { Outboxer } from 'outboxer';
import {
  BROKER_CONSUMERS,
  brokerKind,
  chaosBroker,
  type BrokerEnvironment,
  type BrokerKind,
  type ChaosBroker,
} from './broker.js';
import {
  GROUPS_PER_OUTBOX,
  INSTANCE_NAME,
  activeModes,
  groupKey,
  outboxOptions,
  type ChildEnvironment,
  type OutboxMode,
} from './config.js';
import type { ChaosDatabase, ChaosServer } from './database.js';
import { FaultProxy } from './fault-proxy.js';
import { CONSUMER_DATABASE, prepareConsumerDatabase } from './inbox-check.js';
import { PostgresCluster } from './postgres-cluster.js';
import { postgresDatabase } from './postgres-database.js';
import type { RunSettings } from './run-settings.js';
import { valueRows } from './sql.js';

/** The throwaway servers, made but not yet created. */
export interface RunServers {
  database: ChaosDatabase;
  /** The outbox's database server, which the faults hurt. */
  app: ChaosServer;
  /** The destination's database server. */
  sink: PostgresCluster;
  brokerType: BrokerKind | undefined;
  broker: ChaosBroker | undefined;
}

/** The servers once created, and what the run reaches them by. */
export interface PreparedServers {
  appUrl: string;
  sinkUrl: string;
  brokerEnv: BrokerEnvironment | null;
  kafka: ChildEnvironment['kafka'];
  kafkaAdmin: ReturnType<Kafka['admin']> | undefined;
  topic: string | undefined;
  modes: OutboxMode[];
  /** The outbox relayed to the run's broker, proven at its consumers. */
  brokerOutbox: OutboxMode | undefined;
  /** Between the relays and the destination's database. */
  proxy: FaultProxy;
}

export function runServers(database: ChaosDatabase, seed: number): RunServers {
  const brokerType = brokerKind();
  return {
    database,
    app: database.server('app'),
    sink: new PostgresCluster({ name: 'sink' }),
    brokerType,
    broker: brokerType === undefined ? undefined : chaosBroker(brokerType, seed),
  };
}

/**
 * On exit, whatever the way: kills the children, keeps the servers' logs with the run, and
 * (unless CHAOS_KEEP) removes the servers. SIGINT and SIGTERM exit through it.
 */
export function cleanUpOnExit(settings: RunSettings, servers: RunServers, killAllChildren: () => void): void {
  const { database, app, sink, broker } = servers;
  const { runDir, keep, log } = settings;
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

/**
 * Creates the servers and their databases, the Kafka topic, the tables the publishers and the
 * sink write, the outbox's migrations, and the fault proxy.
 */
export async function prepareServers(settings: RunSettings, servers: RunServers): Promise<PreparedServers> {
  const { database, app, sink, broker, brokerType } = servers;
  const { seed, log } = settings;
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
  let kafkaAdmin: ReturnType<Kafka['admin']> | undefined;
  let topic: string | undefined;
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
  } else if (process.env.CHAOS_KAFKA === '0') log('CHAOS_KAFKA=0: running without Kafka');
  else log('no Kafka on 127.0.0.1:9092: running without it');

  const modes = activeModes(kafka !== null, database.notifications, brokerType);
  const brokerOutbox = modes.find((m) => m.destination === 'broker');
  for (const ddl of database.tables) await database.queryOnce(appUrl, ddl);
  const orderIds = modes.flatMap((m) =>
    Array.from({ length: GROUPS_PER_OUTBOX }, (_, i) => groupKey(m.name, i)),
  );
  await database.queryOnce(
    appUrl,
    `INSERT INTO orders (id) VALUES ${valueRows(orderIds.length, 1)}`,
    orderIds,
  );
  await postgresDatabase.queryOnce(
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
  return { appUrl, sinkUrl, brokerEnv, kafka, kafkaAdmin, topic, modes, brokerOutbox, proxy };
}
