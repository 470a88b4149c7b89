/**
 * The commands that change the outbox: migrate, retry-dead, discard, prune. The destructive ones
 * ask for confirmation (unless --yes), work in batches (1,000 ids at a time; prune in the
 * pruner's batches), report progress on stderr and can be interrupted between batches: each batch
 * is its own transaction, and what was done stays done.
 */
import type { Outboxer } from '../core/outboxer.js';
import { count, duration, json } from './format.js';
import type { CliSession } from './session.js';
import { confirm, Progress, type CliIo } from './terminal.js';
import { CliError } from './usage-error.js';

/** Ids per statement for retry-dead and discard. */
export const PAGE = 1000;

export async function migrateCommand(session: CliSession, io: CliIo): Promise<void> {
  const name = session.options.outbox ?? 'default';
  await session.outboxer({ name, partitions: 1, ordering: 'group', recorded: false }).migrate();
  const tables = createdTables(session);
  if (session.options.json) {
    io.stdout.write(json({ migrated: true, table: session.tableName, tables }));
  } else {
    const companions = tables.slice(1).map((t) => t.slice(session.tableName.length));
    const listed = `${companions.slice(0, -1).join(', ')} and ${companions.at(-1)}`;
    io.stdout.write(`Migrated ${session.tableName} (with its ${listed} tables).\n`);
  }
}

/**
 * The tables migrate creates, message table first, as `schema.name` or `name` like
 * `session.tableName`. Read from the DDL the dialect runs rather than listed here, so the list
 * follows the dialect's schema (a dialect may add companions of its own) and cannot drift from it.
 */
function createdTables(session: CliSession): string[] {
  const qualifier = session.tableName.slice(0, session.tableName.length - session.table.name.length);
  return session.database.adapter.dialect
    .schema(session.table)
    .flatMap((ddl) => [...ddl.matchAll(/CREATE TABLE (?:IF NOT EXISTS )?(?:"[^"]*"\.)?"([^"]+)"/g)])
    .map((match) => `${qualifier}${match[1]!}`);
}

async function approve(session: CliSession, io: CliIo, question: string, action: string): Promise<void> {
  if (session.options.yes) return;
  if (!(await confirm(io, question, action))) throw new CliError('Nothing was changed.', 1);
}

function listIds(ids: readonly number[]): string {
  const shown = ids.slice(0, 10).join(', ');
  return ids.length > 10 ? `${shown}, … (${count(ids.length)} ids)` : shown;
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const result: T[][] = [];
  for (let i = 0; i < items.length; i += size) result.push(items.slice(i, i + size));
  return result;
}

/**
 * Calls `act` on pages of up to {@link PAGE} dead ids, oldest first, until none is left. Ids it
 * already handled that are dead again (a revived message that failed again) are not taken twice.
 * Messages that go dead while it runs are included.
 */
async function forEachDeadPage(
  outboxer: Outboxer<never, boolean>,
  outbox: string,
  act: (ids: number[]) => Promise<number>,
  progress: Progress,
): Promise<void> {
  const handled = new Set<number>();
  let skip = 0;
  for (;;) {
    const limit = PAGE + skip;
    const page = await outboxer.listDead(outbox, { limit });
    const fresh = page.map((m) => m.id).filter((id) => !handled.has(id));
    if (fresh.length === 0) {
      if (page.length < limit) return;
      skip = page.length; // a full page of messages handled already: look further
      continue;
    }
    skip = page.length - fresh.length;
    const ids = fresh.slice(0, PAGE);
    progress.add(await act(ids));
    for (const id of ids) handled.add(id);
  }
}

export async function retryDeadCommand(session: CliSession, io: CliIo): Promise<void> {
  const target = await session.target();
  // Revived as the relaying nodes would: with onDead 'park' as a due retry its group waits for.
  const outboxer = session.outboxer(target, { onDead: await session.onDead(target) });
  const { ids } = session.options;
  const dead = ids.length > 0 ? ids.length : (await outboxer.counts(target.name)).dead;
  if (dead === 0) {
    finish(session, io, { outbox: target.name, revived: 0 }, `Outbox ${target.name} has no dead messages.`);
    return;
  }
  await approve(
    session,
    io,
    ids.length > 0
      ? `Make ${ids.length === 1 ? 'message' : 'messages'} ${listIds(ids)} of outbox ${target.name} pending again, if dead?`
      : `Make ${all(dead)} of outbox ${target.name} pending again? They are delivered again, each before the later messages of its group.`,
    'retry-dead',
  );
  const started = Date.now();
  const progress = new Progress(io, 'revived', ids.length > 0 ? ids.length : dead);
  if (ids.length > 0) {
    for (const page of chunks(ids, PAGE)) progress.add(await outboxer.retryDead(target.name, { ids: page }));
  } else {
    await forEachDeadPage(
      outboxer,
      target.name,
      (page) => outboxer.retryDead(target.name, { ids: page }),
      progress,
    );
  }
  progress.finish();
  finish(
    session,
    io,
    { outbox: target.name, revived: progress.value },
    `Revived ${count(progress.value)} dead ${plural(progress.value)} of outbox ${target.name} in ${duration(Date.now() - started)}.`,
  );
}

export async function discardCommand(session: CliSession, io: CliIo): Promise<void> {
  const target = await session.target();
  const onDead = await session.onDead(target);
  const outboxer = session.outboxer(target, { onDead });
  const { ids } = session.options;
  const dead = ids.length > 0 ? 0 : (await outboxer.counts(target.name)).dead;
  if (ids.length === 0 && dead === 0) {
    finish(session, io, { outbox: target.name, discarded: 0 }, `Outbox ${target.name} has no dead messages.`);
    return;
  }
  await approve(
    session,
    io,
    ids.length > 0
      ? `Remove ${ids.length === 1 ? 'message' : 'messages'} ${listIds(ids)} of outbox ${target.name} for good? Groups waiting behind ${ids.length === 1 ? 'it' : 'them'} move on.`
      : `Remove ${all(dead)} of outbox ${target.name} for good?`,
    'discard',
  );
  const started = Date.now();
  const progress = new Progress(io, 'discarded', ids.length > 0 ? ids.length : dead);
  if (ids.length > 0) {
    for (const page of chunks(ids, PAGE)) progress.add(await outboxer.discard(target.name, page));
  } else {
    await forEachDeadPage(outboxer, target.name, (page) => outboxer.discard(target.name, page), progress);
  }
  progress.finish();
  finish(
    session,
    io,
    { outbox: target.name, discarded: progress.value },
    `Discarded ${count(progress.value)} ${plural(progress.value)} of outbox ${target.name} in ${duration(Date.now() - started)}.`,
  );
}

export async function pruneCommand(session: CliSession, io: CliIo): Promise<void> {
  const target = await session.target();
  const keep = session.options.olderThan!;
  const outboxer = session.outboxer(target, { retention: { keep } });
  const { delivered } = await outboxer.counts(target.name);
  const window =
    keep === 0 ? 'every delivered message' : `delivered messages older than ${duration(keep * 1000)}`;
  if (delivered === 0) {
    finish(
      session,
      io,
      { outbox: target.name, pruned: 0 },
      `Outbox ${target.name} keeps no delivered messages.`,
    );
    return;
  }
  await approve(
    session,
    io,
    `Delete ${window} of outbox ${target.name} (it keeps ${count(delivered)} delivered in all)?`,
    'prune',
  );
  const started = Date.now();
  const progress = new Progress(io, 'pruned', undefined);
  const pruned = await outboxer.prune(target.name, { onBatch: (n) => progress.add(n) });
  progress.finish();
  finish(
    session,
    io,
    { outbox: target.name, pruned },
    `Pruned ${count(pruned)} delivered ${plural(pruned)} of outbox ${target.name} in ${duration(Date.now() - started)}.`,
  );
}

/** `the 1 dead message`, `all 2,500 dead messages`. */
function all(dead: number): string {
  return dead === 1 ? 'the 1 dead message' : `all ${count(dead)} dead messages`;
}

function plural(n: number): string {
  return n === 1 ? 'message' : 'messages';
}

function finish(session: CliSession, io: CliIo, result: object, text: string): void {
  io.stdout.write(session.options.json ? json(result) : `${text}\n`);
}
