/**
 * One relaying process of the scale-out rows (bench/scale-out.ts): loads, connects, and waits for
 * its orders on stdin, one a line: `go` starts relaying, `stop` stops gracefully and exits. It
 * reports on stdout, a JSON object a line: `ready`, `started`, `progress` (messages delivered so
 * far, every 100 ms while it delivers), `stopped`.
 */
import { createInterface } from 'node:readline';
import pg from 'pg';
import { Outboxer, batchRelay } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';

const send = (message: object): void => {
  process.stdout.write(`${JSON.stringify(message)}\n`);
};

const url = process.env.BENCH_CHILD_URL!;
const table = process.env.BENCH_CHILD_TABLE!;
const partitions = Number(process.env.BENCH_CHILD_PARTITIONS);
const leaseTimeout = Number(process.env.BENCH_CHILD_LEASE);
const nodeId = process.env.BENCH_CHILD_NODE!;

// A pool of 4 a process: 8 processes stay within the server's connections beside other work.
const pool = new pg.Pool({ connectionString: url, max: 4, application_name: `bench-${nodeId}` });
let delivered = 0;
let reported = 0;
const outboxer = new Outboxer({
  database: nodePostgres(pool),
  nodeId,
  leaseTimeout,
  outboxes: {
    bench: {
      table,
      partitions,
      batchSize: 100,
      notify: true,
      relay: batchRelay(async (batch) => {
        delivered += batch.length;
      }),
    },
  },
});
const progress = setInterval(() => {
  if (delivered === reported) return;
  reported = delivered;
  send({ type: 'progress', delivered });
}, 100);

send({ type: 'ready' });
for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'go') {
    await outboxer.start();
    send({ type: 'started' });
  } else if (line === 'stop') {
    await outboxer.stop();
    clearInterval(progress);
    send({ type: 'progress', delivered });
    send({ type: 'stopped' });
    await pool.end();
    process.exit(0);
  }
}
