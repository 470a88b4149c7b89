/** The commands that only read: counts, pending, dead, blocked. */
import type { Counts } from '../core/outboxer.js';
import type { Envelope } from '../core/relay.js';
import { count, json, relative, shorten, table } from './format.js';
import type { CliSession, OutboxTarget } from './session.js';
import type { CliIo } from './terminal.js';

/** Five lease periods of the default leaseTimeout: what `counts()` warns about. */
const SILENT_RELAY_MS = 150_000;

export async function countsCommand(session: CliSession, io: CliIo): Promise<void> {
  const targets =
    session.options.outbox === undefined ? await session.recordedOutboxes() : [await session.target()];
  if (targets.length === 0) await session.target(); // throws: nothing recorded, no --outbox
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
            { ...counts, orphaned: target.partitions === undefined ? null : counts.orphaned },
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
          counts.relaySeenAt === null ? 'never' : relative(counts.relaySeenAt, now),
        ]),
        ['left', 'right', 'right', 'right', 'right', 'left', 'left'],
      ),
    );
  }
  for (const { target, counts } of results) warnAbout(io, target, counts, now);
}

/** `10,000+` for a figure that stopped at `--up-to`. */
function atLeast(figure: number, upTo: number | undefined): string {
  return upTo !== undefined && figure >= upTo ? `${count(figure)}+` : count(figure);
}

function warnAbout(io: CliIo, target: OutboxTarget, counts: Counts, now: number): void {
  const silentFor = counts.relaySeenAt === null ? Infinity : now - counts.relaySeenAt.getTime();
  if (counts.pending > 0 && silentFor > SILENT_RELAY_MS) {
    const seen =
      counts.relaySeenAt === null
        ? 'no relaying node has ever been seen'
        : `no relaying node was seen for ${relative(counts.relaySeenAt, now).replace(' ago', '')}`;
    io.stderr.write(
      `warning: ${target.name}: ${count(counts.pending)} messages are pending and ${seen}: is one running?\n`,
    );
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
