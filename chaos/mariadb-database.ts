/** The chaos run's database seam (database.ts) on MariaDB (MySQL): mysql2 pools and `outboxer/mysql2`. */
import mysql from 'mysql2/promise';
import { mysql2 } from 'outboxer/mysql2';
import type { Row } from 'outboxer';
import type { ChaosDatabase, ChaosPool } from './database.js';
import { withTimeout } from './sql.js';
import { MariadbCluster } from './mariadb-cluster.js';

/** The rows of a SELECT; nothing for a statement that returns a result header. */
const rowsOf = <T>(result: unknown): T[] => (Array.isArray(result) ? (result as T[]) : []);

function pool(url: string, options: { max: number; name: string }): ChaosPool {
  const pool = mysql.createPool({
    uri: url,
    connectionLimit: options.max,
    connectTimeout: 5000,
    connectAttributes: { program_name: `chaos-${options.name}` },
  });
  return {
    adapter: mysql2(pool),
    async query<T extends Row>(text: string, values: readonly unknown[] = []) {
      return rowsOf<T>((await pool.query(text, [...values]))[0]);
    },
    async begin() {
      const connection = await pool.getConnection();
      try {
        await connection.beginTransaction();
      } catch (error) {
        connection.destroy();
        throw error;
      }
      return {
        connection,
        async query<T extends Row>(text: string, values: readonly unknown[] = []) {
          return rowsOf<T>((await connection.query(text, [...values]))[0]);
        },
        commit: () => connection.commit(),
        rollback: () => connection.rollback(),
        // After an error the connection's state is unknown (cut, or in a transaction the server
        // rolled back): close it rather than hand it to the next writer.
        release: (broken?: Error) => (broken === undefined ? connection.release() : connection.destroy()),
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
  let connection: mysql.Connection | undefined;
  try {
    return await withTimeout(
      (async () => {
        connection = await mysql.createConnection({ uri: url, connectTimeout: timeout });
        connection.on('error', () => undefined);
        return rowsOf<T>((await connection.query(text, [...values]))[0]);
      })(),
      timeout,
      () => connection?.destroy(),
    );
  } finally {
    void connection?.end().catch(() => connection?.destroy());
  }
}

export const mariadbDatabase: ChaosDatabase = {
  kind: 'mysql',
  label: 'MariaDB',
  notifications: false,
  server: (name) => new MariadbCluster({ name }),
  pool,
  queryOnce,
  tables: [
    `CREATE TABLE orders (id VARCHAR(255) NOT NULL PRIMARY KEY, version BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB`,
    `CREATE TABLE published (message_id BIGINT NOT NULL PRIMARY KEY, outbox VARCHAR(100) NOT NULL,
       group_key VARCHAR(512) NULL, seq BIGINT NOT NULL, hash VARCHAR(64) NOT NULL, publisher VARCHAR(64) NOT NULL,
       poison BOOLEAN NOT NULL, fail_times INT NOT NULL, at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB`,
  ],
  async terminateConnections(url) {
    let connection: mysql.Connection | undefined;
    try {
      connection = await mysql.createConnection({ uri: url, connectTimeout: 5000 });
      connection.on('error', () => undefined);
      const ids = rowsOf<{ id: number }>(
        (
          await connection.query(
            `SELECT id FROM information_schema.PROCESSLIST
             WHERE db = DATABASE() AND id <> CONNECTION_ID() AND command NOT IN ('Daemon', 'Killed')`,
          )
        )[0],
      );
      let cut = 0;
      for (const { id } of ids) {
        // A connection that ended meanwhile is an "Unknown thread id": not cut by us.
        await connection.query('KILL CONNECTION ?', [id]).then(
          () => (cut += 1),
          () => undefined,
        );
      }
      return cut;
    } finally {
      await connection?.end().catch(() => connection?.destroy());
    }
  },
  faults: {
    'db-restart': 'SIGTERM of mariadbd (a clean shutdown, every connection cut), then start',
    'db-crash': 'SIGKILL of mariadbd, then start: InnoDB crash recovery from its redo log',
    'db-terminate': 'KILL CONNECTION of every client connection to the outbox database',
    'db-freeze': 'SIGSTOP of mariadbd for seconds (a hung server, no reset), then SIGCONT',
  },
};
