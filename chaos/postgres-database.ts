/** The chaos run's database seam (database.ts) on PostgreSQL: node-postgres and `outboxer/pg`. */
import pg from 'pg';
import { nodePostgres } from 'outboxer/pg';
import type { Row } from 'outboxer';
import type { ChaosDatabase, ChaosPool } from './database.js';
import { numbered, withTimeout } from './sql.js';
import { PostgresCluster } from './postgres-cluster.js';

function pool(url: string, options: { max: number; name: string; bare?: boolean }): ChaosPool {
  const pool = new pg.Pool({
    connectionString: url,
    max: options.max,
    connectionTimeoutMillis: 5000,
    application_name: `chaos-${options.name}`,
  });
  pool.on('error', () => undefined); // An idle client cut by a fault: the pool replaces it.
  // A client checked out of the pool has no 'error' listener: one whose connection dies between two
  // statements would crash the process. Its queries fail instead, and release(error) discards it.
  if (options.bare !== true) pool.on('connect', (client) => client.on('error', () => undefined));
  return {
    adapter: nodePostgres(pool),
    async query<T extends Row>(text: string, values: readonly unknown[] = []) {
      return (await pool.query<T>(numbered(text), [...values])).rows;
    },
    async begin() {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
      } catch (error) {
        client.release(error as Error);
        throw error;
      }
      return {
        connection: client,
        async query<T extends Row>(text: string, values: readonly unknown[] = []) {
          return (await client.query<T>(numbered(text), [...values])).rows;
        },
        commit: async () => void (await client.query('COMMIT')),
        rollback: async () => void (await client.query('ROLLBACK')),
        release: (broken?: Error) => client.release(broken),
      };
    },
    end: () => pool.end(),
  };
}

async function queryOnce<T extends Row>(
  url: string,
  text: string,
  values: readonly unknown[] = [],
  timeout = 5000,
): Promise<T[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeout });
  client.on('error', () => undefined);
  try {
    return await withTimeout(
      (async () => {
        await client.connect();
        return (await client.query<T>(numbered(text), [...values])).rows;
      })(),
      timeout,
      () => undefined,
    );
  } finally {
    void client.end().catch(() => undefined);
  }
}

export const postgresDatabase: ChaosDatabase = {
  kind: 'postgres',
  label: 'PostgreSQL',
  notifications: true,
  server: (name) => new PostgresCluster({ name }),
  pool,
  queryOnce,
  tables: [
    `CREATE TABLE orders (id text PRIMARY KEY, version bigint NOT NULL DEFAULT 0)`,
    `CREATE TABLE published (message_id bigint PRIMARY KEY, outbox text NOT NULL, group_key text, seq bigint NOT NULL,
       hash text NOT NULL, publisher text NOT NULL, poison boolean NOT NULL, fail_times int NOT NULL,
       at timestamptz NOT NULL DEFAULT now())`,
  ],
  async terminateConnections(url) {
    const rows = await queryOnce<{ n: number }>(
      url,
      `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
    );
    return rows[0]?.n ?? 0;
  },
  faults: {
    'db-restart': 'pg_ctl restart -m fast of the outbox database',
    'db-crash':
      'pg_ctl stop -m immediate of the outbox database, then start: crash recovery, which forgets the acknowledgements committed asynchronously in the last moments',
    'db-terminate': 'pg_terminate_backend of every connection to the outbox database',
    'db-freeze': 'SIGSTOP of every Postgres process for seconds (a hung server, no reset), then SIGCONT',
  },
};
