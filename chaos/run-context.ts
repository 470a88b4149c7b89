/**
 * What every phase of a chaos run shares (its settings, servers and children), and the status
 * line it logs while the faults play and the outbox drains.
 */
import { OUTBOX_TABLE } from './config.js';
import { effectCount } from './inbox-check.js';
import { postgresDatabase } from './postgres-database.js';
import type { RunChildren } from './run-children.js';
import type { PreparedServers, RunServers } from './run-servers.js';
import type { RunSettings } from './run-settings.js';

export interface RunContext {
  settings: RunSettings;
  servers: RunServers;
  prepared: PreparedServers;
  children: RunChildren;
}

/** A statement on the destination's database (Postgres). */
export const querySink = postgresDatabase.queryOnce;

/** Committed, delivered, pending per outbox, children alive: one line for the log. */
export async function status(ctx: RunContext): Promise<string> {
  const query = ctx.servers.database.queryOnce;
  const { appUrl, sinkUrl, brokerEnv } = ctx.prepared;
  const { relays, publishers } = ctx.children;
  try {
    const pending = await query<{ outbox: string; pending: number | string }>(
      appUrl,
      `SELECT outbox, sum(CASE WHEN status < 3 THEN 1 ELSE 0 END) AS pending FROM ${OUTBOX_TABLE} GROUP BY outbox ORDER BY outbox`,
    );
    const [published] = await query<{ n: number | string }>(appUrl, `SELECT count(*) AS n FROM published`);
    const [delivered] = await querySink<{ n: number }>(
      sinkUrl,
      `SELECT coalesce(max(seq), 0)::int AS n FROM deliveries`,
    );
    const effects = brokerEnv === null ? '' : `, effects ${await effectCount(brokerEnv.consumerUrl)}`;
    return `committed ${published?.n}, sink rows ${delivered?.n}${effects}, pending ${pending.map((p) => `${p.outbox}=${Number(p.pending)}`).join(' ')}, relays ${relays.filter((s) => s.alive).length}/3, publishers ${publishers.filter((s) => s.alive).length}/${publishers.length}`;
  } catch (error) {
    return `status unavailable (${(error as Error).message})`;
  }
}
