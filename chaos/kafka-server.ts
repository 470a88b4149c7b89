/**
 * A throwaway Kafka broker (KRaft, broker and controller in one JVM) for the inbox's chaos run, on
 * two free ports of 127.0.0.1 and a temporary directory, from the jars scripts/services/kafka.sh
 * caches (`OUTBOXER_SERVICES_DIR`, default ~/.cache/outboxer-services). The shared broker on 9092
 * serves other tests: this one is ours to pause.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import type { BrokerEnvironment, ChaosBroker } from './broker.js';
import { sleep } from './random.js';
import { freePort, tailOf } from './server-tools.js';

const TOPIC = 'chaos-inbox';
// Eight partitions over two consumers, each handling four at once: one message at a time per
// partition (the receiver keeps its order), so the partitions are the consumers' parallelism.
const PARTITIONS = 8;

function javaBinary(): string {
  if (process.env.JAVA) return process.env.JAVA;
  const candidate = '/usr/lib/jvm/java-17-openjdk-amd64/bin/java';
  return existsSync(candidate) ? candidate : 'java';
}

export class KafkaServer implements ChaosBroker {
  readonly kind = 'kafka' as const;
  readonly label = 'Kafka (throwaway, KRaft)';
  readonly dir = mkdtempSync(join(tmpdir(), 'outboxer-chaos-kafka-'));
  readonly logFile = join(this.dir, 'kafka.log');
  private port = 0;
  private child: ChildProcess | undefined;
  private readonly libs = join(
    process.env.OUTBOXER_SERVICES_DIR ?? join(homedir(), '.cache', 'outboxer-services'),
    'kafka',
    'libs',
  );
  private readonly java = javaBinary();

  private get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  private tool(args: string[]): string {
    const result = spawnSync(
      this.java,
      ['-Xmx256m', '-XX:TieredStopAtLevel=1', '-XX:+UseSerialGC', '-cp', `${this.libs}/*`, ...args],
      { encoding: 'utf8', timeout: 120_000 },
    );
    if (result.status !== 0) throw new Error(`${args[0]} failed: ${result.stderr || result.error}`);
    return result.stdout.trim();
  }

  async create(): Promise<void> {
    if (!existsSync(this.libs))
      throw new Error(`Kafka jars not found in ${this.libs}: run bash scripts/services/kafka.sh once`);
    this.port = await freePort();
    const controller = await freePort();
    const props = join(this.dir, 'server.properties');
    writeFileSync(
      props,
      [
        'process.roles=broker,controller',
        'node.id=1',
        `controller.quorum.bootstrap.servers=127.0.0.1:${controller}`,
        `listeners=PLAINTEXT://127.0.0.1:${this.port},CONTROLLER://127.0.0.1:${controller}`,
        `advertised.listeners=PLAINTEXT://127.0.0.1:${this.port}`,
        'listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT',
        'controller.listener.names=CONTROLLER',
        'inter.broker.listener.name=PLAINTEXT',
        `log.dirs=${join(this.dir, 'data')}`,
        'auto.create.topics.enable=false',
        'offsets.topic.replication.factor=1',
        'offsets.topic.num.partitions=4',
        'transaction.state.log.replication.factor=1',
        'transaction.state.log.min.isr=1',
        'share.coordinator.state.topic.replication.factor=1',
        'share.coordinator.state.topic.min.isr=1',
        'group.initial.rebalance.delay.ms=0',
        'num.network.threads=2',
        'num.io.threads=2',
      ].join('\n') + '\n',
    );
    const id = this.tool(['kafka.tools.StorageTool', 'random-uuid']).split('\n').pop()!;
    this.tool(['kafka.tools.StorageTool', 'format', '--standalone', '-t', id, '-c', props]);
    const log = openSync(this.logFile, 'a');
    this.child = spawn(
      this.java,
      ['-Xms256m', '-Xmx512m', '-XX:+UseG1GC', '-cp', `${this.libs}/*`, 'kafka.Kafka', props],
      { stdio: ['ignore', log, log] },
    );
    const until = Date.now() + 180_000;
    const kafka = new Kafka({
      clientId: 'chaos-harness',
      brokers: [this.address],
      logLevel: logLevel.NOTHING,
    });
    for (;;) {
      if (this.child.exitCode !== null) throw new Error(`Kafka exited at start:\n${tailOf(this.logFile)}`);
      const admin = kafka.admin();
      try {
        await admin.connect();
        await admin.createTopics({
          topics: [{ topic: TOPIC, numPartitions: PARTITIONS, replicationFactor: 1 }],
          waitForLeaders: true,
        });
        return;
      } catch (error) {
        if (Date.now() > until) throw new Error(`Kafka did not answer on ${this.address}: ${String(error)}`);
        await sleep(1000);
      } finally {
        await admin.disconnect().catch(() => undefined);
      }
    }
  }

  environment(consumerUrl: string): BrokerEnvironment {
    return { kind: 'kafka', url: this.address, destination: TOPIC, queues: [], consumerUrl };
  }

  pause(paused: boolean): void {
    if (this.child?.pid !== undefined && this.child.exitCode === null)
      process.kill(this.child.pid, paused ? 'SIGSTOP' : 'SIGCONT');
  }

  async recordsCarried(): Promise<number> {
    const admin = new Kafka({
      clientId: 'chaos-checker',
      brokers: [this.address],
      logLevel: logLevel.NOTHING,
    }).admin();
    await admin.connect();
    try {
      const offsets = await admin.fetchTopicOffsets(TOPIC);
      return offsets.reduce((n, o) => n + Number(o.high) - Number(o.low), 0);
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
  }

  destroySync(): void {
    if (this.child?.pid !== undefined && this.child.exitCode === null) {
      this.child.kill('SIGCONT');
      this.child.kill('SIGKILL');
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
