/**
 * The inbox's end-to-end proof (`CHAOS_BROKER`): the consumer's database, the wait until the
 * consumers have handled what the outbox relayed, and its checker. It compares the messages
 * committed into the broker outbox (`published`) with the consumer's `effects`:
 *
 * - every committed message has exactly one effect: none missing, none doubled (`double_effects`,
 *   which the unique key of `effects` fills instead of failing), and the effect count equals the
 *   committed count and is above 0, so the proof cannot pass on an empty run;
 * - no effect of a message that was never committed or was rolled back;
 * - per group, effects in the producer's order (the `outboxer-id` and the group's commit
 *   sequence both grow), and none reported late by the inbox;
 * - the content as published (a hash of the payload and the publisher's headers);
 * - the inbox's records equal the effects (they commit together).
 *
 * The duplicates the broker carried (Kafka: records in the topic beyond one per message) and those
 * the consumers met (the inbox's telemetry) are counted: they are what the inbox absorbs.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Outboxer } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import pg from 'pg';
import { INBOX_NAME, type ChaosBroker } from './broker.js';
import { readRolledBack } from './checker-sources.js';
import type { OutboxMode } from './config.js';
import type { ChaosDatabase } from './database.js';

export const CONSUMER_DATABASE = 'chaos_consumer';

/** The effects tables and the inbox's, in the consumer's database (Postgres). */
export async function prepareConsumerDatabase(url: string): Promise<void> {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  try {
    await pool.query(
      `CREATE TABLE effects (effect_seq bigserial PRIMARY KEY, message_id bigint NOT NULL UNIQUE, source text NOT NULL,
         group_key text, group_seq bigint NOT NULL, hash text NOT NULL, consumer text NOT NULL,
         out_of_order boolean NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`,
    );
    await pool.query(
      `CREATE TABLE double_effects (message_id bigint NOT NULL, consumer text NOT NULL,
         at timestamptz NOT NULL DEFAULT clock_timestamp())`,
    );
    await new Outboxer({ database: nodePostgres(pool), inboxes: { [INBOX_NAME]: {} } }).migrate();
  } finally {
    await pool.end();
  }
}

/** Effects written so far, or undefined while the database does not answer. */
export async function effectCount(url: string): Promise<number | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const { rows } = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM effects');
    return rows[0]?.n;
  } catch {
    return undefined;
  } finally {
    void client.end().catch(() => undefined);
  }
}

export interface InboxReport {
  broker: string;
  outbox: string;
  committed: number;
  effects: number;
  /** Committed, no effect. */
  missing: number;
  /** A second effect of one message (rows of `double_effects`). */
  doubled: number;
  /** Effects of messages never committed, of which from rolled-back transactions. */
  phantom: number;
  fromRolledBack: number;
  /** Per group, an effect after that of a later message. */
  reordered: number;
  /** Messages the inbox handled and reported late (`outOfOrder`). */
  reportedLate: number;
  corrupted: number;
  /** Rows of the inbox table: one per effect. */
  inboxRecords: number;
  /** Records the broker holds (Kafka), and those beyond one per committed message. */
  carried: number | null;
  carriedDuplicates: number | null;
  /** Deliveries the inbox recognised as handled before (its telemetry, per consumer). */
  duplicatesAbsorbed: number;
  consumerExits: number;
  examples: string[];
}

export interface InboxCheckInput {
  database: ChaosDatabase;
  appUrl: string;
  consumerUrl: string;
  runDir: string;
  mode: OutboxMode;
  broker: ChaosBroker;
  consumerExits: number;
}

/** A message committed into the broker outbox, as `published` holds it. */
export interface Committed {
  group_key: string | null;
  seq: string | number;
  hash: string;
}

/** An effect, as the consumers wrote it, in the order they wrote it. */
export interface Effect {
  message_id: string | number;
  group_key: string | null;
  group_seq: string | number;
  hash: string;
  consumer: string;
  out_of_order: boolean;
}

export type Comparison = Pick<
  InboxReport,
  'missing' | 'phantom' | 'fromRolledBack' | 'reordered' | 'reportedLate' | 'corrupted' | 'examples'
>;

/** The committed messages against the effects: what is missing, foreign, late or altered. */
export function compareEffects(
  committed: ReadonlyMap<number, Committed>,
  effects: readonly Effect[],
  rolledBack: ReadonlySet<number>,
): Comparison {
  const result: Comparison = {
    missing: 0,
    phantom: 0,
    fromRolledBack: 0,
    reordered: 0,
    reportedLate: 0,
    corrupted: 0,
    examples: [],
  };
  const example = (text: string): void => {
    if (result.examples.length < 10) result.examples.push(text);
  };
  const seen = new Set<number>();
  const last = new Map<string, { id: number; seq: number }>();
  for (const e of effects) {
    const id = Number(e.message_id);
    seen.add(id);
    if (e.out_of_order) {
      result.reportedLate += 1;
      example(`message ${id} (group ${e.group_key}) was handled late, by ${e.consumer}`);
    }
    const truth = committed.get(id);
    if (truth === undefined) {
      result.phantom += 1;
      if (rolledBack.has(id)) result.fromRolledBack += 1;
      example(
        `message ${id} has an effect (by ${e.consumer}) but was ${rolledBack.has(id) ? 'rolled back' : 'never committed'}`,
      );
      continue;
    }
    if (truth.hash !== e.hash) {
      result.corrupted += 1;
      example(
        `message ${id} had its effect with different content (hash ${e.hash}, published ${truth.hash})`,
      );
    }
    if (e.group_key === null) continue;
    const seq = Number(e.group_seq);
    const before = last.get(e.group_key);
    if (before !== undefined && (id <= before.id || seq <= before.seq)) {
      result.reordered += 1;
      example(`group ${e.group_key}: ${id} (seq ${seq}) took effect after ${before.id} (seq ${before.seq})`);
    }
    if (before === undefined || id > before.id) last.set(e.group_key, { id, seq });
  }
  for (const [id, truth] of committed) {
    if (seen.has(id)) continue;
    result.missing += 1;
    example(`message ${id} (group ${truth.group_key}) was committed and has no effect`);
  }
  return result;
}

export async function checkInbox(input: InboxCheckInput): Promise<InboxReport> {
  const published = await input.database.queryOnce<
    Committed & { message_id: string | number; [column: string]: unknown }
  >(
    input.appUrl,
    'SELECT message_id, group_key, seq, hash FROM published WHERE outbox = ? ORDER BY message_id',
    [input.mode.name],
    300_000,
  );
  const committed = new Map(published.map((p) => [Number(p.message_id), p]));
  const client = new pg.Client({ connectionString: input.consumerUrl });
  await client.connect();
  let effects, doubled, inboxRecords;
  try {
    ({ rows: effects } = await client.query<Effect>(
      'SELECT message_id, group_key, group_seq, hash, consumer, out_of_order FROM effects ORDER BY effect_seq',
    ));
    doubled = (await client.query<{ n: number }>('SELECT count(*)::int AS n FROM double_effects')).rows[0]!.n;
    inboxRecords = (
      await client.query<{ n: number }>('SELECT count(*)::int AS n FROM outboxer_inbox WHERE inbox = $1', [
        INBOX_NAME,
      ])
    ).rows[0]!.n;
  } finally {
    await client.end().catch(() => undefined);
  }
  const carried = await input.broker.recordsCarried().catch(() => undefined);
  return {
    broker: input.broker.label,
    outbox: input.mode.name,
    committed: committed.size,
    effects: effects.length,
    doubled,
    inboxRecords,
    carried: carried ?? null,
    carriedDuplicates: carried === undefined ? null : carried - committed.size,
    duplicatesAbsorbed: countEvents(input.runDir, 'duplicate'),
    consumerExits: input.consumerExits,
    ...compareEffects(committed, effects, readRolledBack(input.runDir)),
  };
}

/** Lines of `kind` in the consumers' `inbox-<label>.jsonl` files. */
function countEvents(runDir: string, kind: string): number {
  let n = 0;
  for (const file of readdirSync(runDir).filter((f) => f.startsWith('inbox-'))) {
    for (const line of readFileSync(join(runDir, file), 'utf8').split('\n')) {
      try {
        if (line.trim() && (JSON.parse(line) as { kind: string }).kind === kind) n += 1;
      } catch {
        // a line cut by SIGKILL
      }
    }
  }
  return n;
}

/** The violations of the proof; empty when every committed message took effect exactly once, in order. */
export function inboxViolations(r: InboxReport): string[] {
  const found: string[] = [];
  const say = (n: number, what: string): void => {
    if (n > 0) found.push(`${r.outbox}: ${n} ${what}`);
  };
  say(r.missing, 'committed messages without an effect');
  say(r.doubled, 'second effects of a message');
  say(r.phantom, 'effects of messages never committed');
  say(r.fromRolledBack, 'effects from rolled-back transactions');
  say(r.reordered, 'effects out of their group order');
  say(r.reportedLate, 'messages the inbox reported late');
  say(r.corrupted, 'effects of corrupted messages');
  if (r.committed === 0) found.push(`${r.outbox}: nothing committed, nothing proved`);
  if (r.effects !== r.committed)
    found.push(`${r.outbox}: ${r.effects} effects for ${r.committed} committed messages`);
  if (r.inboxRecords !== r.effects)
    found.push(`${r.outbox}: ${r.inboxRecords} inbox records for ${r.effects} effects`);
  return found;
}

const fmt = (n: number | null): string => (n === null ? 'unknown' : n.toLocaleString('en-US'));

export function formatInboxReport(r: InboxReport): string {
  const rows: Array<[string, string]> = [
    ['committed', fmt(r.committed)],
    ['effects', fmt(r.effects)],
    ['**committed without an effect**', fmt(r.missing)],
    ['**second effects**', fmt(r.doubled)],
    [
      '**effects never committed / from rolled-back transactions**',
      `${fmt(r.phantom)} / ${fmt(r.fromRolledBack)}`,
    ],
    ['**effects out of group order**', fmt(r.reordered)],
    ['reported late by the inbox', fmt(r.reportedLate)],
    ['corrupted', fmt(r.corrupted)],
    ['inbox records', fmt(r.inboxRecords)],
    ['records the broker carried', fmt(r.carried)],
    ['  of which duplicates (beyond one per message)', fmt(r.carriedDuplicates)],
    ['duplicate deliveries the inbox absorbed', fmt(r.duplicatesAbsorbed)],
    ['consumer processes ended', fmt(r.consumerExits)],
  ];
  const lines = [`### The inbox through ${r.broker}: outbox ${r.outbox}`, '', '| | |', '|---|---:|'];
  for (const [name, value] of rows) lines.push(`| ${name} | ${value} |`);
  lines.push('');
  if (r.examples.length > 0) lines.push('Examples:', '', ...r.examples.map((e) => `- ${e}`), '');
  return lines.join('\n');
}
