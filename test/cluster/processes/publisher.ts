/**
 * The publisher of the multi-process test: for `seconds`, transactions of 1–10 messages over 50
 * groups; each records its ids in `published` in the same transaction, and ~10% roll back.
 * Usage: publisher.ts <schema> <seconds>
 */
import pg from 'pg';
import { Outboxer } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { DATABASE_URL } from '../../support/databases.js';
import { seededRandom } from '../../support/random.js';
import { clusterOutboxOptions } from './shared.js';

const [schema, seconds] = process.argv.slice(2) as [string, string];
const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4, options: `-c search_path=${schema}` });
const outboxer = new Outboxer({
  database: nodePostgres(pool),
  name: 'cluster',
  relay: false,
  outboxes: { events: clusterOutboxOptions },
});
const random = seededRandom(99);
const deadline = Date.now() + Number(seconds) * 1000;
let committed = 0;
let rolledBack = 0;

async function writer(): Promise<void> {
  while (Date.now() < deadline) {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const size = 1 + Math.floor(random() * 10);
      const ids = await outboxer.publishMany(
        client,
        Array.from({ length: size }, () => ({
          outbox: 'events',
          payload: { at: Date.now() },
          groupKey: `g${Math.floor(random() * 50)}`,
        })),
      );
      await client.query('INSERT INTO published (message_id) SELECT unnest($1::bigint[])', [ids]);
      if (random() < 0.1) {
        await client.query('ROLLBACK');
        rolledBack += size;
      } else {
        await client.query('COMMIT');
        committed += size;
      }
    } finally {
      client.release();
    }
  }
}

await Promise.all([writer(), writer(), writer()]);
await pool.end();
process.stdout.write(JSON.stringify({ committed, rolledBack }) + '\n');
