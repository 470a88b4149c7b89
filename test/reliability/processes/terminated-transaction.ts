/**
 * Minimal reproduction: the connection of a transaction that the pg adapter runs for the engine
 * (a settle, a heartbeat, a prune: `executeAtomically`) dies in the middle of it. The statement
 * fails, which the engine handles, and then the client, still checked out of the pool and with no
 * 'error' listener, emits 'error' for the closed socket: an unhandled 'error' event that ends the
 * whole process. Prints "survived" and exits 0 when the process lives on.
 * Usage: terminated-transaction.ts <database url>
 */
import pg from 'pg';
import { nodePostgres } from 'outboxer/pg';

const pool = new pg.Pool({ connectionString: process.argv[2], max: 1 });
pool.on('error', () => undefined); // what the pg docs ask for: idle clients are covered
const adapter = nodePostgres(pool);
const failed = await adapter
  .executeAtomically([{ text: 'SELECT pg_terminate_backend(pg_backend_pid())', values: [] }])
  .then(
    () => 'no error',
    (error: unknown) => String(error),
  );
await new Promise((resolve) => setTimeout(resolve, 500));
await pool.end();
process.stdout.write(`statement: ${failed}\nsurvived\n`);
