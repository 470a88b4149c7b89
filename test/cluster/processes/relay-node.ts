/**
 * A relay node for the multi-process test: relays outbox "events" into the table `deliveries`,
 * one INSERT per message (so a SIGKILL can land in the middle of a batch). SIGTERM stops it
 * gracefully. Usage: relay-node.ts <schema> <node-name>
 */
import pg from 'pg';
import { Outboxer, functionRelay } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { DATABASE_URL } from '../../support/databases.js';
import { clusterOutboxOptions } from './shared.js';

const [schema, node] = process.argv.slice(2) as [string, string];
const pool = new pg.Pool({
  connectionString: DATABASE_URL,
  max: 10,
  options: `-c search_path=${schema}`,
  application_name: `${schema}-${node}`,
});
const outboxer = new Outboxer({
  database: nodePostgres(pool),
  name: 'cluster',
  leaseTimeout: 1500,
  outboxes: {
    events: {
      ...clusterOutboxOptions,
      relay: functionRelay(async (message) => {
        await pool.query('INSERT INTO deliveries (message_id, group_key, node) VALUES ($1, $2, $3)', [
          message.id,
          message.groupKey,
          node,
        ]);
        await new Promise((resolve) => setTimeout(resolve, 1));
      }),
    },
  },
});

process.on('SIGTERM', () => {
  void outboxer
    .stop()
    .then(() => pool.end())
    .then(() => process.exit(0));
});

await outboxer.start();
process.stdout.write('ready\n');
