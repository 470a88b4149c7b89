/**
 * A publisher of the chaos run: a publish-only outboxer instance whose writers run real
 * transactions: lock the business rows of the groups they touch (`orders`, in key order, which
 * serialises the publishers of a group so that id order is commit order), bump their versions,
 * publish, record the ids in `published` in the same transaction, and commit, or roll back on
 * purpose (~8%, ids appended to `rolledback-<name>.jsonl`).
 *
 * The harness may ask it to SIGKILL itself right before or right after a COMMIT; SIGTERM stops it
 * after the transactions in flight. Usage: publisher.ts <name> <seed>
 */
import { createHash } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { Outboxer, type PublishInput } from 'outboxer';
import {
  GROUPS_PER_OUTBOX,
  INSTANCE_NAME,
  activeModes,
  childEnvironment,
  contentOf,
  groupKey,
  outboxOptions,
  type ChaosPayload,
  type ControlMessage,
} from '../config.js';
import { chaosDatabase } from '../database.js';
import { random, sleep } from '../random.js';
import { placeholders, valueRows } from '../sql.js';

const [name, seedText] = process.argv.slice(2) as [string, string];
const env = childEnvironment();
const database = chaosDatabase(env.db);
const rnd = random(Number(seedText));
const modes = activeModes(env.kafka !== null, database.notifications, env.broker?.kind);
const totalWeight = modes.reduce((n, m) => n + m.weight, 0);

const pool = database.pool(env.appUrl, { max: env.writers + 1, name: `publisher-${name}` });

const outboxer = new Outboxer({
  database: pool.adapter,
  name: INSTANCE_NAME,
  relay: false,
  outboxes: Object.fromEntries(modes.map((m) => [m.name, outboxOptions(m)])),
});

let stopping = false;
let killAt: 'before-commit' | 'after-commit' | undefined;
const stats = { committed: 0, rolledBack: 0, failed: 0, transactions: 0 };

process.on('message', (message: ControlMessage) => {
  if (message.type === 'kill' && (message.when === 'before-commit' || message.when === 'after-commit'))
    killAt = message.when;
});
// The harness is gone (killed itself): do not outlive it.
process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => {
  stopping = true;
});

function pickMode() {
  let x = rnd() * totalWeight;
  for (const mode of modes) {
    x -= mode.weight;
    if (x < 0) return mode;
  }
  return modes[0]!;
}

const UNICODE = ['é', 'ß', '✓', '🎉', '中文', 'עברית', '\u202e', 'Ω', '\\', '"', "'", '$1', '%s'];

function pad(): string {
  const length = rnd.int(0, 300);
  if (rnd() < 0.8) return 'x'.repeat(length);
  let text = '';
  while (text.length < length) text += rnd.pick(UNICODE);
  return text;
}

interface Planned {
  input: PublishInput & { payload: ChaosPayload; headers: Record<string, string> };
  group: string | null;
}

function plan(): Planned[] {
  const first = pickMode();
  const mixed = rnd() < 0.1 ? pickMode() : first;
  const count = rnd.int(1, 8);
  return Array.from({ length: count }, (_, i) => {
    const mode = i % 2 === 0 ? first : mixed;
    const group = rnd() < 0.1 ? null : groupKey(mode.name, rnd.int(0, GROUPS_PER_OUTBOX - 1));
    const payload: ChaosPayload = { seq: 0, publisher: name, pad: pad() };
    if (mode.destination === 'table') {
      if (rnd() < 0.02) payload.failTimes = rnd.int(1, 3);
      if (!mode.strict && rnd() < env.poison) payload.poison = true;
    }
    const headers: Record<string, string> = { 'x-publisher': name, 'x-index': String(i) };
    if (rnd() < 0.2) headers['x-unicode'] = 'ünïcødé 🎉';
    return { input: { outbox: mode.name, payload, groupKey: group, headers }, group };
  });
}

const hash = (text: string): string => createHash('sha1').update(text).digest('hex').slice(0, 16);

async function transaction(): Promise<void> {
  const planned = plan();
  const tx = await pool.begin();
  let broken: Error | undefined;
  try {
    const groups = [...new Set(planned.map((p) => p.group).filter((g): g is string => g !== null))].sort();
    // Lock the groups' business rows in key order (no deadlocks), then number the messages.
    const rows =
      groups.length === 0
        ? []
        : await tx.query<{ id: string; version: string | number }>(
            `SELECT id, version FROM orders WHERE id IN (${placeholders(groups.length)}) ORDER BY id FOR UPDATE`,
            groups,
          );
    const version = new Map(rows.map((r) => [r.id, Number(r.version)]));
    const added = new Map<string, number>();
    for (const p of planned) {
      if (p.group === null) continue;
      const next = version.get(p.group)! + 1;
      version.set(p.group, next);
      added.set(p.group, (added.get(p.group) ?? 0) + 1);
      p.input.payload.seq = next;
    }
    // One UPDATE per number of messages a group got (mostly one statement: one each).
    for (const n of new Set(added.values())) {
      const ids = groups.filter((g) => added.get(g) === n);
      await tx.query(`UPDATE orders SET version = version + ? WHERE id IN (${placeholders(ids.length)})`, [
        n,
        ...ids,
      ]);
    }
    const ids = await outboxer.publishMany(
      tx.connection,
      planned.map((p) => p.input),
    );
    await tx.query(
      `INSERT INTO published (message_id, outbox, group_key, seq, hash, publisher, poison, fail_times)
       VALUES ${valueRows(planned.length, 8)}`,
      planned.flatMap((p, i) => [
        ids[i],
        p.input.outbox,
        p.group,
        p.input.payload.seq,
        hash(contentOf(p.input.payload, p.input.headers)),
        name,
        p.input.payload.poison === true,
        p.input.payload.failTimes ?? 0,
      ]),
    );
    if (killAt === 'before-commit') process.kill(process.pid, 'SIGKILL');
    if (rnd() < 0.08) {
      await tx.rollback();
      appendFileSync(join(env.runDir, `rolledback-${name}.jsonl`), JSON.stringify(ids) + '\n');
      stats.rolledBack += ids.length;
    } else {
      await tx.commit();
      if (killAt === 'after-commit') process.kill(process.pid, 'SIGKILL');
      stats.committed += ids.length;
    }
    stats.transactions += 1;
  } catch (error) {
    // The database went away or cut us: the transaction failed with the publish in it.
    broken = error as Error;
    stats.failed += 1;
    await tx.rollback().catch(() => undefined);
    throw error;
  } finally {
    tx.release(broken);
  }
}

async function writer(share: number): Promise<void> {
  let failures = 0;
  let budget = 0;
  let last = Date.now();
  while (!stopping) {
    // A token bucket: `share` messages per second on average, bursts of at most one second.
    const now = Date.now();
    budget = Math.min(share, budget + ((now - last) / 1000) * share);
    last = now;
    if (budget < 4.5) {
      await sleep(Math.max(5, ((4.5 - budget) / share) * 1000));
      continue;
    }
    try {
      await transaction();
      budget -= 4.5;
      failures = 0;
    } catch {
      failures += 1;
      await sleep(Math.min(1000, 25 * 2 ** Math.min(failures, 6)));
    }
  }
}

process.stdout.write('ready\n');
await Promise.all(Array.from({ length: env.writers }, () => writer(env.rate / env.writers)));
await pool.end().catch(() => undefined);
process.stdout.write(JSON.stringify(stats) + '\n');
process.exit(0);
