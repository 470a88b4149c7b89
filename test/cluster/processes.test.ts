/**
 * Three relay processes and a publisher process against one Postgres. One relay SIGKILLs itself
 * from inside its relay, in the middle of a batch; another is restarted (a rolling deploy). At the
 * destination: every committed message arrives, none from a rolled-back transaction, each group's
 * first deliveries are in id order, and duplicates come only from the killed node's unacknowledged
 * batches: at least the message it died on, at most one batch per partition it held.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { Outboxer } from 'outboxer';
import { postgresFixture } from '../support/databases.js';
import { sleep, waitUntil } from '../support/random.js';
import { clusterOutboxOptions } from './processes/shared.js';

type Fixture = Awaited<ReturnType<typeof postgresFixture>>;
let fixture: Fixture;
const children = new Set<ChildProcess>();

beforeAll(async () => {
  fixture = await postgresFixture();
  await fixture.query(
    'CREATE TABLE deliveries (seq bigserial PRIMARY KEY, message_id bigint NOT NULL, group_key text, node text NOT NULL)',
  );
  await fixture.query('CREATE TABLE published (message_id bigint PRIMARY KEY)');
  await fixture.query('CREATE TABLE kills (node text PRIMARY KEY, held int NOT NULL, lost int NOT NULL)');
  const admin = new Outboxer({
    database: fixture.database,
    name: 'cluster',
    relay: false,
    outboxes: { events: clusterOutboxOptions },
  });
  await admin.migrate();
});

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await fixture.close();
});

function run(script: string, ...args: string[]): ChildProcess {
  const path = fileURLToPath(new URL(`./processes/${script}`, import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', path, fixture.schema, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

const started = Date.now();
const phase = (what: string) =>
  process.stderr.write(`[multi-process +${((Date.now() - started) / 1000).toFixed(1)}s] ${what}\n`);

async function startRelay(name: string, killAt?: number): Promise<ChildProcess> {
  const child = run('relay-node.ts', name, ...(killAt === undefined ? [] : [String(killAt)]));
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  await waitUntil(() => output.includes('ready'), 60_000, `relay ${name} to start`);
  phase(`relay ${name} ready`);
  return child;
}

test('SIGKILL mid-batch and a rolling restart lose nothing and reorder no group', async () => {
  const relays = new Map<string, ChildProcess>();
  // "a" kills itself on its KILL_AT-th message: past its first batches, while it is delivering.
  const KILL_AT = 50;
  relays.set('a', await startRelay('a', KILL_AT));
  for (const name of ['b', 'c']) relays.set(name, await startRelay(name));

  const publisher = run('publisher.ts', '8');
  const publisherExit = once(publisher, 'exit'); // listen now: it may exit while relays restart
  let published = '';
  publisher.stdout!.on('data', (chunk: Buffer) => (published += chunk.toString()));

  const a = relays.get('a')!;
  await waitUntil(() => a.exitCode !== null || a.signalCode !== null, 60_000, 'a to kill itself mid-batch');
  expect(a.signalCode).toBe('SIGKILL');
  phase('a killed itself');
  await sleep(1000);
  // Rolling deploy of "b": graceful stop, then a new process takes its place.
  relays.get('b')!.kill('SIGTERM');
  const [code] = await once(relays.get('b')!, 'exit');
  expect(code).toBe(0);
  phase('b stopped gracefully');
  relays.set('b2', await startRelay('b2'));
  relays.set('a2', await startRelay('a2'));

  await publisherExit;
  phase(`publisher done: ${published.trim()}`);
  const { committed, rolledBack } = JSON.parse(published) as { committed: number; rolledBack: number };
  const admin = new Outboxer({
    database: fixture.database,
    name: 'cluster',
    relay: false,
    outboxes: { events: clusterOutboxOptions },
  });
  await waitUntil(async () => (await admin.counts('events')).pending === 0, 120_000, 'the outbox to drain');
  phase('drained');
  for (const [name, child] of relays) if (name !== 'a' && name !== 'b') child.kill('SIGTERM');

  const publishedIds = (await fixture.query('SELECT message_id FROM published ORDER BY message_id')).map(
    (r) => Number(r.message_id),
  );
  const deliveries = (await fixture.query(
    'SELECT message_id, group_key, node FROM deliveries ORDER BY seq',
  )) as Array<{ message_id: string; group_key: string; node: string }>;
  const firstBy = new Map<number, string>();
  const lastPerGroup = new Map<string, number>();
  const duplicates: Array<{ id: number; first: string; again: string }> = [];
  const violations: string[] = [];
  for (const d of deliveries) {
    const id = Number(d.message_id);
    if (firstBy.has(id)) {
      duplicates.push({ id, first: firstBy.get(id)!, again: d.node });
      continue;
    }
    firstBy.set(id, d.node);
    const last = lastPerGroup.get(d.group_key) ?? 0;
    if (id < last) violations.push(`${d.group_key}: ${id} after ${last}`);
    lastPerGroup.set(d.group_key, Math.max(last, id));
  }
  const delivered = new Set(firstBy.keys());
  const lost = publishedIds.filter((id) => !delivered.has(id));
  const phantoms = [...delivered].filter((id) => !publishedIds.includes(id));
  const perNode = Object.fromEntries(
    [...new Set(deliveries.map((d) => d.node))].map((n) => [
      n,
      deliveries.filter((d) => d.node === n).length,
    ]),
  );

  console.log(
    `multi-process: committed ${committed} (rolled back ${rolledBack}), delivered ${delivered.size}, lost ${lost.length}, phantom ${phantoms.length}, ` +
      `order violations ${violations.length}, duplicates ${duplicates.length} (first delivered by ${[...new Set(duplicates.map((d) => d.first))].join(', ') || 'nobody'}), per node ${JSON.stringify(perNode)}`,
  );
  expect(publishedIds.length).toBe(committed);
  expect(lost).toEqual([]);
  expect(phantoms).toEqual([]);
  expect(violations).toEqual([]);
  // A graceful stop acknowledges its batch; only the killed node leaves batches to redeliver: one
  // per partition it held when it died (or lost earlier), each at most batchSize messages.
  expect(duplicates.filter((d) => d.first !== 'a')).toEqual([]);
  const [kill] = (await fixture.query(`SELECT held, lost FROM kills WHERE node = 'a'`)) as Array<{
    held: number;
    lost: number;
  }>;
  const fromA = duplicates.filter((d) => d.first === 'a').length;
  const bound = (kill!.held + kill!.lost) * clusterOutboxOptions.batchSize!;
  console.log(
    `multi-process: a died on its ${KILL_AT}th message holding ${kill!.held} partitions (${kill!.lost} lost before): ${fromA} duplicates, at most ${bound}`,
  );
  expect(fromA).toBeGreaterThanOrEqual(1); // the message it died on was never acknowledged
  expect(fromA).toBeLessThanOrEqual(bound);
  await Promise.all(
    [...relays.values()]
      .filter((c) => c.exitCode === null && c.signalCode === null)
      .map((c) => once(c, 'exit')),
  );
}, 300_000);
