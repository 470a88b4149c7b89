/**
 * A relay under load that watches its own event loop. It relays `count` messages already waiting
 * in outbox "load" while it publishes `count` more in transactions of 100, like an application
 * that publishes and relays in one process, and samples its event loop every 5 ms. A gap between
 * two samples counts as blocking only for the part that the loop spent running (event-loop
 * utilisation) and the process spent on a CPU (cpuUsage): waiting for a core on a busy machine is
 * not blocking. Prints one JSON line. Usage: loop-relay.ts <database url> <schema> <count> <batchSize>
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { Outboxer, batchRelay } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';

const [url, schema, countText, batchText] = process.argv.slice(2) as [string, string, string, string];
const count = Number(countText);
const pool = new pg.Pool({ connectionString: url, options: `-c search_path=${schema}`, max: 10 });
pool.on('error', () => undefined);
let delivered = 0;
let bytes = 0;
const outboxer = new Outboxer({
  database: nodePostgres(pool),
  outboxes: {
    load: {
      partitions: 4,
      batchSize: Number(batchText),
      notify: true,
      pollInterval: 100,
      relay: batchRelay(async (batch) => {
        // What a real relay does per message: serialise it.
        for (const m of batch) bytes += JSON.stringify(m.payload).length;
        delivered += batch.length;
      }),
    },
  },
});

const stats = { samples: 0, maxGapMs: 0, maxBusyMs: 0, gapsOver50: 0, busyOver50: 0 };
let lastTime = performance.now();
let lastElu = performance.eventLoopUtilization();
let lastCpu = process.cpuUsage();
const sampler = setInterval(() => {
  const now = performance.now();
  const elu = performance.eventLoopUtilization();
  const cpu = process.cpuUsage();
  const gap = now - lastTime;
  const active = performance.eventLoopUtilization(elu, lastElu).active;
  const cpuMs = (cpu.user - lastCpu.user + cpu.system - lastCpu.system) / 1000;
  const busy = Math.min(gap, active, cpuMs);
  stats.samples += 1;
  stats.maxGapMs = Math.max(stats.maxGapMs, gap);
  stats.maxBusyMs = Math.max(stats.maxBusyMs, busy);
  if (gap > 50) stats.gapsOver50 += 1;
  if (busy > 50) stats.busyOver50 += 1;
  lastTime = now;
  lastElu = elu;
  lastCpu = cpu;
}, 5);

const started = performance.now();
await outboxer.start();
const payload = { text: 'x'.repeat(1000) };
for (let published = 0; published < count; published += 100) {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await outboxer.publishMany(
      client,
      Array.from({ length: 100 }, (_, i) => ({
        outbox: 'load',
        payload: { ...payload, n: published + i },
        groupKey: `g${i % 50}`,
      })),
    );
    await client.query('COMMIT');
  } finally {
    client.release();
  }
}
const deadline = Date.now() + 180_000;
while (delivered < 2 * count && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
await outboxer.stop();
clearInterval(sampler);
await pool.end();
process.stdout.write(
  JSON.stringify({ ...stats, delivered, bytes, seconds: (performance.now() - started) / 1000 }) + '\n',
);
