/**
 * The chaos run's final check: runs the checker (and the inbox's, with a broker), adds the
 * harness's own findings (crashes, no drain, tally drift, slow or failed graceful stops), and
 * writes and prints the report. Returns the violations: none for a passing run.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { check, violations } from './checker.js';
import { OUTBOX_TABLE, STOP_BOUND } from './config.js';
import { faultDescriptions, type FaultRecord } from './faults.js';
import { checkInbox, inboxViolations, type InboxReport } from './inbox-check.js';
import { formatReport, type RunReport } from './report.js';
import type { RunContext } from './run-context.js';
import type { Drained } from './drain.js';

/** What the run observed before the check. */
export interface Observed extends Drained {
  faults: FaultRecord[];
  lastFaultEnd: number;
  tallyDrift: string[];
  /** The consumers caught up with the broker outbox. */
  effectsDrained: boolean;
}

export async function finalCheck(ctx: RunContext, observed: Observed): Promise<string[]> {
  const { database, broker } = ctx.servers;
  const { appUrl, sinkUrl, kafka, modes, brokerOutbox, brokerEnv } = ctx.prepared;
  const { runDir, drainTimeout, seed, seconds, rate, t0, log } = ctx.settings;
  const { exits, stops } = ctx.children;
  const { faults, drainedAt, publishersStopped, lastFaultEnd, tallyDrift, effectsDrained } = observed;
  const query = database.queryOnce;

  log('checking');
  const result = await check({
    database,
    appUrl,
    sinkUrl,
    kafka,
    runDir,
    // The broker outbox is proven at its consumers, by checkInbox below.
    modes: modes.filter((m) => m.destination !== 'broker'),
    faults,
    table: OUTBOX_TABLE,
  });
  writeFileSync(join(runDir, 'check.json'), JSON.stringify(result, null, 2)); // kept whatever happens next
  // Figures for the report only: slow on a big run, and never worth failing it.
  const transactions = await query<{ n: number | string }>(
    appUrl,
    `SELECT count(*) AS n FROM (SELECT DISTINCT publisher, at FROM published) AS t`,
    [],
    300_000,
  ).then(
    ([row]) => Number(row?.n ?? 0),
    () => -1,
  );
  const duringOutages = await Promise.all(
    faults
      .filter((f) => f.kind === 'destination-down')
      .map(async (f) => {
        const [row] = await query<{ n: number | string }>(
          appUrl,
          `SELECT count(*) AS n FROM published WHERE at BETWEEN ? AND ?`,
          [new Date(f.start), new Date(f.end)],
          300_000,
        ).catch(() => [{ n: -1 }]);
        return Number(row?.n ?? 0);
      }),
  );
  const found = violations(result);
  let inbox: InboxReport | undefined;
  if (broker !== undefined && brokerOutbox !== undefined && brokerEnv !== null) {
    inbox = await checkInbox({
      database,
      appUrl,
      consumerUrl: brokerEnv.consumerUrl,
      runDir,
      mode: brokerOutbox,
      broker,
      consumerExits: exits.filter((e) => e.label.startsWith('c')).length,
    });
    found.push(...inboxViolations(inbox));
    if (!effectsDrained) found.push(`the consumers did not catch up within ${drainTimeout / 1000} s`);
  }
  // A child that exited by itself with an error crashed: 0 is a graceful stop, 3 a relay whose
  // start() failed while the database was down (it is started again), signals are the harness's.
  const crashes = exits.filter((e) => e.signal === null && e.code !== 0 && e.code !== 3);
  if (crashes.length > 0)
    found.push(
      `${crashes.length} processes crashed: ${crashes.map((e) => `${e.label} (exit ${e.code})`).join(', ')}`,
    );
  if (drainedAt === undefined) found.push(`the outbox did not drain within ${drainTimeout / 1000} s`);
  if (tallyDrift.length > 0) found.push(`counts() differs from the rows: ${tallyDrift.join('; ')}`);
  const overBound = stops.filter((s) => s.code !== 0 || s.exitMs > STOP_BOUND);
  if (overBound.length > 0)
    found.push(
      `${overBound.length} graceful stops over ${STOP_BOUND} ms or failed: ${overBound.map((s) => `${s.label} ${s.exitMs} ms code ${s.code}`).join(', ')}`,
    );

  const report: RunReport = {
    database: database.label,
    seed,
    seconds,
    rate,
    startedAt: new Date(t0).toISOString(),
    wallSeconds: Math.round((Date.now() - t0) / 1000),
    kafka: kafka !== null,
    faults,
    descriptions: faultDescriptions(database),
    result,
    drainAfterLastFaultMs: drainedAt === undefined ? null : drainedAt - lastFaultEnd,
    drainAfterPublishersMs: drainedAt === undefined ? null : drainedAt - publishersStopped,
    stops,
    publisherExits: exits.filter((e) => e.label.startsWith('p')).length,
    relayExits: exits.filter((e) => e.label.startsWith('r')).length,
    crashes: crashes.map((e) => `${e.label} exit ${e.code}`),
    startFailures: exits.filter((e) => e.code === 3).length,
    commitsDuringOutages: duringOutages,
    transactions,
    tallyDrift,
    inbox,
    violations: found,
  };
  writeFileSync(join(runDir, 'report.json'), JSON.stringify(report, null, 2));
  const text = formatReport(report);
  writeFileSync(join(runDir, 'report.md'), text);
  console.log('\n' + text);
  return found;
}
