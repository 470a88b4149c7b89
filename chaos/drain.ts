/**
 * The end of a chaos run's fault phase: stops the publishers, waits for the outbox to drain and
 * for the consumers to catch up, compares the tallies with the rows, and stops the relays (their
 * graceful stops measured) and the consumers.
 */
import { OUTBOX_TABLE, STOP_BOUND } from './config.js';
import { effectCount } from './inbox-check.js';
import { sleep } from './random.js';
import { status, type RunContext } from './run-context.js';

/** When the publishers had stopped, and when the outbox drained (undefined: it did not in time). */
export interface Drained {
  publishersStopped: number;
  drainedAt: number | undefined;
}

/** Stops the publishers, waits for the three relays, then for no pending message. */
export async function stopPublishersAndDrain(ctx: RunContext): Promise<Drained> {
  const { log, drainTimeout } = ctx.settings;
  const { publishers, relays } = ctx.children;
  log('fault phase over: stopping the publishers');
  for (const slot of publishers) slot.desired = false;
  await Promise.all(
    publishers.map(async (slot) => {
      slot.signal('SIGTERM');
      if ((await slot.waitExit(30_000)) === undefined) slot.signal('SIGKILL');
    }),
  );
  const publishersStopped = Date.now();
  // Relays restarted by a fault may still be on their way: wait for all three.
  const relaysBack = Date.now();
  while (relays.some((s) => !s.alive) && Date.now() - relaysBack < 30_000) await sleep(200);
  await Promise.all(relays.map((s) => s.ready));
  log(`publishers stopped; waiting for the outbox to drain (${await status(ctx)})`);

  let drainedAt: number | undefined;
  while (Date.now() - publishersStopped < drainTimeout) {
    try {
      const [row] = await ctx.servers.database.queryOnce<{ pending: number | string }>(
        ctx.prepared.appUrl,
        `SELECT count(*) AS pending FROM ${OUTBOX_TABLE} WHERE status < 3`,
      );
      if (row !== undefined && Number(row.pending) === 0) {
        drainedAt = Date.now();
        break;
      }
    } catch {
      // keep waiting
    }
    await sleep(250);
  }
  return { publishersStopped, drainedAt };
}

/** Stops the relays (each stop measured against STOP_BOUND), the fault proxy, then the consumers. */
export async function stopRelaysAndConsumers(ctx: RunContext): Promise<void> {
  const { relays, consumers, stops } = ctx.children;
  ctx.settings.log('stopping the relays');
  for (const slot of relays) slot.desired = false;
  await Promise.all(
    relays.map(async (slot) => {
      const label = slot.label;
      const started = Date.now();
      slot.signal('SIGTERM');
      const exit = await slot.waitExit(STOP_BOUND + 20_000);
      const summary = slot.summary
        .map((s) => JSON.parse(s) as { stopMs?: number; loopMaxMs?: number })
        .find((s) => s.stopMs !== undefined);
      stops.push({
        label,
        stopMs: summary?.stopMs ?? null,
        exitMs: Date.now() - started,
        code: exit?.code ?? null,
        loopMaxMs: summary?.loopMaxMs,
      });
      if (exit === undefined) slot.signal('SIGKILL');
    }),
  );
  await ctx.prepared.proxy.close();
  for (const slot of consumers) slot.desired = false;
  await Promise.all(
    consumers.map(async (slot) => {
      slot.signal('SIGTERM');
      if ((await slot.waitExit(30_000)) === undefined) slot.signal('SIGKILL');
    }),
  );
}

/**
 * Where the figures `counts()` sums (the tallies every statement writes with its change, through
 * crashes and failovers) differ from the rows, per outbox: none expected.
 */
export async function tallyDriftOf(ctx: RunContext): Promise<string[]> {
  const query = ctx.servers.database.queryOnce;
  const url = ctx.prepared.appUrl;
  let counted, tallied;
  try {
    counted = await query<Figures>(
      url,
      `SELECT outbox, sum(CASE WHEN status < 3 THEN 1 ELSE 0 END) AS pending,
         sum(CASE WHEN status = 3 THEN 1 ELSE 0 END) AS dead, sum(CASE WHEN status = 4 THEN 1 ELSE 0 END) AS delivered
       FROM ${OUTBOX_TABLE} GROUP BY outbox`,
    );
    tallied = await query<Figures>(
      url,
      `SELECT outbox, sum(pending) AS pending, sum(dead) AS dead, sum(delivered) AS delivered
       FROM ${OUTBOX_TABLE}_tallies GROUP BY outbox`,
    );
  } catch (error) {
    return [`could not compare them: ${String(error)}`];
  }
  const text = (rows: Figures[], outbox: string): string => {
    const row = rows.find((r) => r.outbox === outbox);
    return [row?.pending, row?.dead, row?.delivered].map((n) => Number(n ?? 0)).join('/');
  };
  return [...new Set([...counted, ...tallied].map((r) => r.outbox))]
    .filter((outbox) => text(counted, outbox) !== text(tallied, outbox))
    .map(
      (outbox) =>
        `${outbox}: rows ${text(counted, outbox)} (pending/dead/delivered), tallies ${text(tallied, outbox)}`,
    );
}

/**
 * Waits until the consumers have an effect for every message committed into the broker outbox
 * (or the drain timeout), since the outbox drained only into the broker. True when they caught up.
 */
export async function drainConsumers(ctx: RunContext): Promise<boolean> {
  const { brokerEnv, brokerOutbox, appUrl } = ctx.prepared;
  const { log, drainTimeout } = ctx.settings;
  if (brokerEnv === null || brokerOutbox === undefined) return true;
  const started = Date.now();
  const [row] = await ctx.servers.database.queryOnce<{ n: number | string }>(
    appUrl,
    `SELECT count(*) AS n FROM published WHERE outbox = ?`,
    [brokerOutbox.name],
  );
  const committed = Number(row?.n ?? 0);
  while (Date.now() - started < drainTimeout) {
    if (((await effectCount(brokerEnv.consumerUrl)) ?? -1) >= committed) {
      log(`the consumers caught up: ${committed} effects`);
      return true;
    }
    await sleep(500);
  }
  log(`the consumers did not catch up (${await effectCount(brokerEnv.consumerUrl)} effects of ${committed})`);
  return false;
}

/** Sums as the driver gives them: bigint or decimal text, or numbers. */
interface Figures {
  [column: string]: unknown;
  outbox: string;
  pending: string | number | null;
  dead: string | number | null;
  delivered: string | number | null;
}
