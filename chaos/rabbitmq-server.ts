/**
 * A throwaway RabbitMQ node for the inbox's chaos run: its own node name, AMQP and distribution
 * ports, data and log directories, and no plugins, beside the shared node on 5672 (which serves
 * other tests: this one is ours to pause). As root it runs as the `rabbitmq` OS user, whose home
 * holds the Erlang cookie; epmd is shared, as it is meant to be.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import amqp from 'amqplib';
import type { BrokerEnvironment, ChaosBroker } from './broker.js';
import { BROKER_CONSUMERS } from './broker.js';
import { sleep } from './random.js';
import { freePort, idsOf, tailOf } from './server-tools.js';

const EXCHANGE = 'chaos-inbox';
const SERVER = '/usr/lib/rabbitmq/bin/rabbitmq-server';

export class RabbitMqServer implements ChaosBroker {
  readonly kind = 'rabbitmq' as const;
  readonly label = 'RabbitMQ (throwaway node)';
  readonly dir = mkdtempSync(join(tmpdir(), 'outboxer-chaos-rabbitmq-'));
  private port = 0;
  private child: ChildProcess | undefined;
  private queues: string[] = [];
  private readonly node: string;

  constructor(seed: number) {
    this.node = `outboxer-chaos-${seed}-${process.pid}@localhost`;
  }

  get logFile(): string {
    return join(this.dir, 'log', `${this.node}.log`);
  }

  private get url(): string {
    // A short heartbeat: a paused broker is noticed in seconds, not minutes.
    return `amqp://guest:guest@127.0.0.1:${this.port}?heartbeat=5`;
  }

  async create(consumers = BROKER_CONSUMERS): Promise<void> {
    if (!existsSync(SERVER))
      throw new Error(
        `${SERVER} not found: run bash scripts/services/rabbitmq.sh once (it installs rabbitmq-server)`,
      );
    this.port = await freePort();
    const dist = await freePort();
    const plugins = join(this.dir, 'enabled_plugins');
    writeFileSync(plugins, '[].\n');
    const env = {
      RABBITMQ_NODENAME: this.node,
      RABBITMQ_NODE_IP_ADDRESS: '127.0.0.1',
      RABBITMQ_NODE_PORT: String(this.port),
      RABBITMQ_DIST_PORT: String(dist),
      RABBITMQ_MNESIA_BASE: join(this.dir, 'mnesia'),
      RABBITMQ_LOG_BASE: join(this.dir, 'log'),
      RABBITMQ_ENABLED_PLUGINS_FILE: plugins,
      RABBITMQ_CONFIG_FILE: join(this.dir, 'rabbitmq'),
      RABBITMQ_PID_FILE: join(this.dir, 'rabbitmq.pid'),
    };
    const output = join(this.dir, 'stdout.log');
    if (userInfo().uid === 0) {
      const { uid, gid } = idsOf('rabbitmq');
      chownSync(this.dir, uid, gid);
      chownSync(plugins, uid, gid);
      const assignments = Object.entries({ HOME: '/var/lib/rabbitmq', ...env }).map(([k, v]) => `${k}=${v}`);
      this.child = spawn('runuser', ['-u', 'rabbitmq', '--', 'env', ...assignments, SERVER], {
        stdio: 'ignore',
      });
    } else {
      this.child = spawn(SERVER, [], { env: { ...process.env, ...env }, stdio: 'ignore' });
    }
    const until = Date.now() + 180_000;
    for (;;) {
      if (this.child.exitCode !== null)
        throw new Error(`RabbitMQ exited at start:\n${tailOf(this.logFile)}${tailOf(output)}`);
      try {
        const connection = await amqp.connect(this.url);
        try {
          const channel = await connection.createChannel();
          await channel.assertExchange(EXCHANGE, 'direct', { durable: true });
          this.queues = Array.from({ length: consumers }, (_, i) => `chaos-inbox-${i + 1}`);
          for (const queue of this.queues) {
            // One active consumer per queue: a consumer started again while its predecessor's
            // connection lingers waits, instead of splitting a group's messages between two.
            await channel.assertQueue(queue, {
              durable: true,
              arguments: { 'x-single-active-consumer': true },
            });
            await channel.bindQueue(queue, EXCHANGE, queue);
          }
          await channel.close();
        } finally {
          await connection.close().catch(() => undefined);
        }
        return;
      } catch (error) {
        if (Date.now() > until) throw new Error(`RabbitMQ did not answer on ${this.port}: ${String(error)}`);
        await sleep(1000);
      }
    }
  }

  environment(consumerUrl: string): BrokerEnvironment {
    return { kind: 'rabbitmq', url: this.url, destination: EXCHANGE, queues: this.queues, consumerUrl };
  }

  /** The server's processes: runuser, the start script, beam.smp and its helpers. */
  private pids(): number[] {
    const root = this.child?.pid;
    if (root === undefined || this.child?.exitCode !== null) return [];
    const all = [root];
    for (let i = 0; i < all.length; i += 1) {
      const children = spawnSync('pgrep', ['-P', String(all[i])], { encoding: 'utf8' }).stdout;
      all.push(...children.split('\n').filter(Boolean).map(Number));
    }
    return all;
  }

  pause(paused: boolean): void {
    for (const pid of this.pids()) {
      try {
        process.kill(pid, paused ? 'SIGSTOP' : 'SIGCONT');
      } catch {
        // gone meanwhile
      }
    }
  }

  async recordsCarried(): Promise<undefined> {
    return undefined;
  }

  destroySync(): void {
    for (const pid of this.pids().reverse()) {
      try {
        process.kill(pid, 'SIGCONT');
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
