/**
 * The relay process of the memory row: drains an existing table with a relay that only counts,
 * and reports its resident memory (peak from the kernel: VmHWM) and its pace per tenth of the
 * backlog. Started by memory.ts as `node --import tsx bench/memory-child.ts`.
 */
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { Outboxer, batchRelay } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';

function kernelMemory(): { rssKb: number; hwmKb: number } {
  const status = readFileSync('/proc/self/status', 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rssKb: field('VmRSS'), hwmKb: field('VmHWM') };
}

const send = (message: object): void => {
  process.stdout.write(`${JSON.stringify(message)}\n`);
};

const url = process.env.BENCH_CHILD_URL!;
const table = process.env.BENCH_CHILD_TABLE!;
const count = Number(process.env.BENCH_CHILD_COUNT);
const batchSize = Number(process.env.BENCH_CHILD_BATCH ?? 100);

send({ type: 'ready', ...kernelMemory() });
const pool = new pg.Pool({ connectionString: url, max: 4 });
let delivered = 0;
let nextMark = count / 10;
let done!: () => void;
const finished = new Promise<void>((resolve) => (done = resolve));
let started = 0;
const outboxer = new Outboxer({
  database: nodePostgres(pool),
  outboxes: {
    bench: {
      table,
      batchSize,
      relay: batchRelay(async (batch) => {
        delivered += batch.length;
        while (delivered >= nextMark && nextMark <= count) {
          send({
            type: 'progress',
            delivered,
            seconds: (performance.now() - started) / 1000,
            ...kernelMemory(),
          });
          nextMark += count / 10;
        }
        if (delivered >= count) done();
      }),
    },
  },
});
started = performance.now();
await outboxer.start();
await finished;
await outboxer.stop();
const seconds = (performance.now() - started) / 1000;
await pool.end();
send({ type: 'done', delivered, seconds, maxRssKb: process.resourceUsage().maxRSS, ...kernelMemory() });
