/** The commands that only read: counts, pending, dead, blocked. */
import type { Counts } from '../core/api.js';
import type { Envelope } from '../core/relay.js';
import { count, json, relative, shorten, table } from './format.js';
import { tableHasRows } from './queries.js';
import type { CliSession, OutboxTarget } from './session.js';
import type { CliIo } from './terminal.js';

/** Five lease periods of the default leaseTimeout: what `counts()` warns about. */
const SILENT_RELAY_MS = 150_000;

export async function countsCommand(session: CliSession, io: CliIo): Promise<void> {
  const targets =
    session.options.outbox === undefined ? await session.recordedOutboxes() : [await session.target()];
  const results: Array<{ target: OutboxTarget; counts: Counts }> = [];
  for (const target of targets) {
    const { upTo } = session.options;
    const counts = await session.outboxer(target).counts(target.name, upTo === undefined ? {} : { upTo });
    results.push({ target, counts });
  }
  const now = Date.now();
  if (session.options.json) {
    io.stdout.write(
      json(
        Object.fromEntries(
          results.map(({ target, counts }) => [
            target.name,
            {
              ...counts,
              orphaned: target.partitions === undefined ? null : counts.orphaned,
              recorded: target.recorded,
            },
          ]),
        ),
      ),
    );
  } else {
    io.stdout.write(
      table(
        ['OUTBOX', 'PENDING', 'DELIVERED', 'DEAD', 'ORPHANED', 'OLDEST PENDING', 'RELAY SEEN'],
        results.map(({ target, counts }) => [
          target.name,
          atLeast(counts.pending, session.options.upTo),
          atLeast(counts.delivered, session.options.upTo),
          atLeast(counts.dead, session.options.upTo),
          target.partitions === undefined ? '-' : atLeast(counts.orphaned, session.options.upTo),
          relative(counts.oldestPendingAt, now),
          relaySeen(target, counts, now),
        ]),
        ['left', 'right', 'right', 'right', 'right', 'left', 'left'],
      ),
    );
  }
  // A fresh table (just migrated, no relaying node started yet) is not an error: the result is
  // empty, and the note says why and what to do.
  if (targets.length === 0) io.stderr.write(await nothingRecorded(session));
  for (const { target, counts } of results) warnAbout(session, io, target, counts, now);
}

async function nothingRecorded(session: CliSession): Promise<string> {
  const { tableName } = session;
  const recording = `No outbox is recorded in ${tableName}_config yet: a relaying node records its outboxes when it starts.`;
  return (await session.run(tableHasRows(session.table)))
    ? `${recording} ${tableName} holds messages: pass --outbox <name> to count those of one outbox.\n`
    : `${recording} ${tableName} holds no message either.\n`;
}

/**
 * The RELAY SEEN column. `relaySeenAt` is the newest row of `<table>_nodes`, and a clean stop()
 * deletes its node's row: `null` therefore means "none running now", and only an outbox no
 * relaying node ever recorded in `<table>_config` was never relayed.
 */
function relaySeen(target: OutboxTarget, counts: Counts, now: number): string {
  if (counts.relaySeenAt !== null) return relative(counts.relaySeenAt, now);
  return target.recorded ? 'not running' : 'never';
}

/** `10,000+` for a figure that stopped at `--up-to`. */
function atLeast(figure: number, upTo: number | undefined): string {
  return upTo !== undefined && figure >= upTo ? `${count(figure)}+` : count(figure);
}

function warnAbout(session: CliSession, io: CliIo, target: OutboxTarget, counts: Counts, now: number): void {
  const silentFor = counts.relaySeenAt === null ? Infinity : now - counts.relaySeenAt.getTime();
  if (counts.pending > 0 && silentFor > SILENT_RELAY_MS) {
    const pending =
      counts.pending === 1 ? '1 message is pending' : `${count(counts.pending)} messages are pending`;
    // A node that crashed leaves its row behind, a clean stop() removes it (see relaySeen).
    const relay =
      counts.relaySeenAt !== null
        ? `no relaying node was seen for ${relative(counts.relaySeenAt, now).replace(' ago', '')}: is one running?`
        : target.recorded
          ? 'no relaying node is running (the last one stopped): start one.'
          : `no relaying node has ever started this outbox (it is not recorded in ${session.tableName}_config): start one.`;
    io.stderr.write(`warning: ${target.name}: ${pending} and ${relay}\n`);
  }
  if (target.partitions !== undefined && counts.orphaned > 0) {
    io.stderr.write(
      `warning: ${target.name}: ${count(counts.orphaned)} pending messages sit in partitions >= ${target.partitions}, which no worker reads (see docs/deploying.md).\n`,
    );
  }
}

export async function pendingCommand(session: CliSession, io: CliIo): Promise<void> {
  const target = await session.target();
  const messages = await session.outboxer(target).listPending(target.name, { limit: session.options.limit });
  const now = Date.now();
  writeMessages(session, io, messages, `No pending messages in outbox ${target.name}.`, [
    ['ID', 'right', (m) => String(m.id)],
    ['GROUP', 'left', (m) => shorten(m.groupKey ?? '-', 40)],
    ['TYPE', 'left', (m) => shorten(m.type ?? '-', 30)],
    ['PART', 'right', (m) => String(m.partition)],
    ['ATTEMPTS', 'right', (m) => String(m.attempts)],
    ['PUBLISHED', 'left', (m) => relative(m.insertedAt, now)],
    ['NEXT ATTEMPT', 'left', (m) => (m.attempts === 0 ? '-' : relative(m.nextAttemptAt, now))],
    ['LAST ERROR', 'left', (m) => shorten(m.lastError ?? '', 80)],
  ]);
}

export async function deadCommand(session: CliSession, io: CliIo): Promise<void> {
  const target = await session.target();
  const messages = await session.outboxer(target).listDead(target.name, { limit: session.options.limit });
  const now = Date.now();
  writeMessages(session, io, messages, `No dead messages in outbox ${target.name}.`, [
    ['ID', 'right', (m) => String(m.id)],
    ['GROUP', 'left', (m) => shorten(m.groupKey ?? '-', 40)],
    ['TYPE', 'left', (m) => shorten(m.type ?? '-', 30)],
    ['ATTEMPTS', 'right', (m) => String(m.attempts)],
    ['PUBLISHED', 'left', (m) => relative(m.insertedAt, now)],
    ['LAST ERROR', 'left', (m) => shorten(m.lastError ?? '', 80)],
  ]);
}

type Column<T> = [header: string, align: 'left' | 'right', cell: (row: T) => string];

function writeMessages(
  session: CliSession,
  io: CliIo,
  messages: Envelope[],
  empty: string,
  columns: Array<Column<Envelope>>,
): void {
  if (session.options.json) {
    io.stdout.write(json(messages));
  } else if (messages.length === 0) {
    io.stdout.write(`${empty}\n`);
  } else {
    io.stdout.write(
      table(
        columns.map(([header]) => header),
        messages.map((m) => columns.map(([, , cell]) => cell(m))),
        columns.map(([, align]) => align),
      ),
    );
  }
  moreNote(session, io, messages.length);
}

function moreNote(session: CliSession, io: CliIo, shown: number): void {
  if (shown === session.options.limit) {
    io.stderr.write(`(the first ${count(shown)}; pass --limit for more)\n`);
  }
}

export async function blockedCommand(session: CliSession, io: CliIo): Promise<void> {
  const target = await session.target();
  const onDead = await session.onDead(target);
  const groups = await session
    .outboxer(target, { onDead })
    .blockedGroups(target.name, { limit: session.options.limit });
  const now = Date.now();
  if (session.options.json) {
    io.stdout.write(json(groups));
  } else if (groups.length === 0) {
    io.stdout.write(`No blocked groups in outbox ${target.name}.\n`);
  } else {
    io.stdout.write(
      table(
        ['GROUP', 'HEAD', 'STATE', 'ATTEMPTS', 'FAILING SINCE', 'NEXT ATTEMPT', 'WAITING', 'LAST ERROR'],
        groups.map((g) => [
          shorten(g.groupKey, 40),
          String(g.headId),
          g.parked ? 'parked' : 'retrying',
          String(g.attempts),
          relative(g.blockedSince, now),
          g.parked ? '-' : relative(g.nextAttemptAt, now),
          count(g.waiting),
          shorten(g.lastError ?? '', 80),
        ]),
        ['left', 'right', 'left', 'right', 'left', 'left', 'right', 'left'],
      ),
    );
  }
  moreNote(session, io, groups.length);
}
