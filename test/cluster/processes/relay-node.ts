/**
 * A relay node for the multi-process test: relays outbox "events" into the table `deliveries`,
 * one INSERT per message (so a SIGKILL can land in the middle of a batch). SIGTERM stops it
 * gracefully. With `kill-at`, the node SIGKILLs itself from inside its relay on its `kill-at`th
 * message, after recording that delivery and before returning: provably mid-batch. It first
 * records in `kills` how many batches it could leave unacknowledged: the partitions it holds, plus
 * those it lost earlier without acknowledging their batch.
 * Usage: relay-node.ts <schema> <node-name> [kill-at]
 */
import diagnostics from 'node:diagnostics_channel';
import pg from 'pg';
import { Outboxer, functionRelay } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { DATABASE_URL } from '../../support/databases.js';
import { clusterOutboxOptions } from './shared.js';

const [schema, node, killAt] = process.argv.slice(2) as [string, string, string | undefined];
const pool = new pg.Pool({
  connectionString: DATABASE_URL,
  max: 10,
  options: `-c search_path=${schema}`,
  application_name: `${schema}-${node}`,
});

// The partitions this node holds, from its own lease events.
const held = new Set<number>();
let lost = 0;
const partitionOf = (message: unknown) => (message as { partition: number }).partition;
diagnostics.subscribe('outboxer:lease:acquired', (m) => held.add(partitionOf(m)));
diagnostics.subscribe('outboxer:lease:released', (m) => held.delete(partitionOf(m)));
diagnostics.subscribe('outboxer:lease:lost', (m) => {
  if (held.delete(partitionOf(m))) lost += 1;
});

let delivering = 0;
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
        if (killAt !== undefined && ++delivering === Number(killAt)) {
          await pool.query('INSERT INTO kills (node, held, lost) VALUES ($1, $2, $3)', [
            node,
            held.size,
            lost,
          ]);
          process.kill(process.pid, 'SIGKILL');
          await new Promise(() => undefined); // never returns
        }
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
