/**
 * The checker of a chaos run. It compares what was committed (the `published` table, written in
 * the same transactions as the messages, and the ids of the transactions rolled back on purpose)
 * with what the destinations recorded (the `deliveries` table of the sink database, and the Kafka
 * topic), and with what is left in the outbox table, and reports per outbox:
 *
 * - committed, delivered (distinct committed ids that arrived), lost (committed, neither delivered
 *   nor dead nor discarded by the operator: must be 0), phantom (delivered but never committed: must be 0), delivered from
 *   rolled-back transactions (must be 0);
 * - per-group order violations among first deliveries, by id and by the group's commit sequence
 *   (must be 0); content corrupted on the way (must be 0);
 * - duplicates, each attributed to the fault that caused it;
 * - dead messages (only where maxAttempts is finite; any in a strict outbox is a violation),
 *   and whether their lastError was truncated and its password redacted;
 * - the operator's decisions on parked messages (discarded, revived); a discarded message that
 *   reached the destination is a violation.
 */
import pg from 'pg';
import type { ChaosDatabase } from './database.js';
import { MAX_ERROR_LENGTH, type OutboxMode } from './config.js';
import type { FaultRecord } from './faults.js';
import {
  readEvents,
  readKafka,
  readOperator,
  readRolledBack,
  readSinkDeliveries,
  type Delivery,
} from './checker-sources.js';
import { checkOutbox, countTruthGaps, sum, type OutboxReport } from './outbox-check.js';

export interface CheckInput {
  /** The outbox's database, at `appUrl`; the destination's is Postgres. */
  database: ChaosDatabase;
  appUrl: string;
  sinkUrl: string;
  kafka: { brokers: string[]; topic: string } | null;
  runDir: string;
  modes: readonly OutboxMode[];
  faults: readonly FaultRecord[];
  table: string;
}

export interface CheckResult {
  outboxes: OutboxReport[];
  total: OutboxReport;
  /** Group sequences with a hole among committed messages: the truth data itself is wrong. */
  truthGaps: number;
}

const SECRET = 's3cr3t-chaos-password';

export async function check(input: CheckInput): Promise<CheckResult> {
  const app = input.database.pool(input.appUrl, { max: 1, name: 'checker' });
  const sink = new pg.Client({ connectionString: input.sinkUrl });
  await sink.connect();
  try {
    const rolledBack = readRolledBack(input.runDir);
    const operator = readOperator(input.runDir);
    const events = readEvents(input.runDir);
    // char_length: characters on both databases (MySQL's length() counts bytes).
    const leftovers = (
      await app.query<{
        id: string | number;
        outbox: string;
        status: number;
        attempts: number;
        error_length: number | null;
        leaked: boolean | number | null;
      }>(
        `SELECT id, outbox, status, attempts, char_length(last_error) AS error_length, last_error LIKE ? AS leaked FROM ${input.table}`,
        [`%${SECRET}%`],
      )
    ).map((r) => ({ ...r, leaked: Boolean(r.leaked) }));
    const sinkDeliveries = await readSinkDeliveries(sink);
    const kafkaDeliveries = input.kafka ? await readKafka(input.kafka) : new Map<string, Delivery[]>();
    let truthGaps = 0;
    const reports: OutboxReport[] = [];
    for (const mode of input.modes) {
      const published = (
        await app.query<{
          message_id: string | number;
          group_key: string | null;
          seq: string | number;
          hash: string;
          poison: boolean | number;
        }>(
          'SELECT message_id, group_key, seq, hash, poison FROM published WHERE outbox = ? ORDER BY message_id',
          [mode.name],
        )
      ).map((r) => ({ ...r, poison: Boolean(r.poison) }));
      const deliveries =
        (mode.destination === 'kafka' ? kafkaDeliveries.get(mode.name) : sinkDeliveries.get(mode.name)) ?? [];
      const report = checkOutbox(
        mode,
        published,
        deliveries,
        rolledBack,
        operator.filter((a) => a.outbox === mode.name),
        leftovers,
        input.faults,
        events,
      );
      truthGaps += countTruthGaps(published);
      reports.push(report);
    }
    return { outboxes: reports, total: sum(reports), truthGaps };
  } finally {
    await app.end().catch(() => undefined);
    await sink.end().catch(() => undefined);
  }
}

/** The violations of a result; empty when the run proved what it should. */
export function violations(result: CheckResult): string[] {
  const found: string[] = [];
  for (const r of result.outboxes) {
    const say = (n: number, what: string): void => {
      if (n > 0) found.push(`${r.outbox}: ${n} ${what}`);
    };
    say(r.lost, 'lost');
    say(r.phantom, 'phantom (delivered, never committed)');
    say(r.rolledBackDelivered, 'delivered from rolled-back transactions');
    say(r.reordered, 'order violations among first deliveries');
    say(r.corrupted, 'corrupted on the way');
    say(r.pendingAtEnd, 'still pending after the drain');
    say(r.lastErrorTooLong, `lastError longer than maxErrorLength (${MAX_ERROR_LENGTH})`);
    say(r.secretLeaked, 'lastError with the password of a connection string');
    say(r.discardedDelivered, 'discarded by the operator, yet delivered');
    if (r.mode === 'strict') say(r.dead, 'dead in a strict outbox');
    if (r.committed === 0) found.push(`${r.outbox}: nothing committed, nothing proved`);
    if (r.rolledBack > 0) found.push(`${r.outbox}: ${r.rolledBack} rolled-back ids appear as committed`);
  }
  if (result.truthGaps > 0) found.push(`${result.truthGaps} holes in committed group sequences`);
  return found;
}
