// The instance the mounting examples of docs/dashboard.md serve (a stand-in for your own).
import pg from 'pg';
import { Outboxer, functionRelay } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
export const outboxer = new Outboxer({
  database: nodePostgres(pool),
  outboxes: { orders: { relay: functionRelay(async () => {}) } },
});

/** Your own check, from a session cookie or a header your proxy sets. */
export function isAdmin(request: Request): boolean {
  return request.headers.get('x-forwarded-groups')?.split(',').includes('ops') ?? false;
}
