/**
 * MySQL and MariaDB for the benchmark (`BENCH_DB=mysql`, through mysql2): a database of its own,
 * created for the run and dropped after it; the fixtures (bulk fills, ANALYZE TABLE and InnoDB's
 * purge, plans, server times) and the plain SQL each row is measured against. Tested on MariaDB
 * 10.11; the MySQL 8 branches (no `RETURNING`, `EXPLAIN ANALYZE`) have not run.
 */
import mysql from 'mysql2/promise';
import type { Row, SqlQuery } from 'outboxer';
import { hashGroupKey } from 'outboxer';
import { mysql2, mysqlDialect, type Mysql2TransactionConnection } from 'outboxer/mysql2';
// The dialect's own column list and clock, so both sides of a row read and write the same bytes.
import { COLUMNS, NOW_MS } from '../src/dialects/mysql/shared.js';
import {
  databaseOf,
  rolledBack,
  serverTimeOf,
  timeOnConnection,
  type BenchConnection,
  type BenchDatabase,
  type FillOptions,
  type PlainClaim,
  type PlainSql,
} from './database.js';
import { packageVersion, partitionsOfGroups, sleep, sqlPayload } from './support.js';

const quote = (name: string): string => `\`${name}\``;
const INSERT_COLUMNS = '(outbox, `partition`, group_key, type, payload, headers, inserted_at)';
const ROW = `(?, ?, ?, ?, ?, ?, ${NOW_MS})`;
/** A table of the integers 0…NUMBERS-1, the bulk fills' generator (MySQL has no generate_series). */
const NUMBERS = 'bench_numbers';
const CHUNK = 250_000;

const rowsOf = (result: unknown): Row[] => (Array.isArray(result) ? (result as Row[]) : []);

/** The plain SQL of each row; `returning`: the server has `DELETE … RETURNING` (MariaDB). */
function plainSql(returning: boolean): PlainSql {
  const insert = (table: string, row: readonly unknown[]): SqlQuery => ({
    text: `INSERT INTO ${quote(table)} ${INSERT_COLUMNS} VALUES ${ROW}`,
    values: row,
  });
  return {
    insert: (table, row) => [insert(table, row)],
    insertMany: (table, rows) => [
      {
        text: `INSERT INTO ${quote(table)} ${INSERT_COLUMNS} VALUES ${rows.map(() => ROW).join(', ')}`,
        values: rows.flat(),
      },
    ],
    // What serializeWrites adds on MySQL: an exclusive lock on the group's row, new or found.
    locked: {
      label: "INSERT … ON DUPLICATE KEY UPDATE of the group's lock row, then the one-row INSERT",
      insert: (table, row) => [
        {
          text: `INSERT INTO ${quote(`${table}_groups`)} (outbox, group_key) VALUES (?, ?) ON DUPLICATE KEY UPDATE group_key = group_key`,
          values: [row[0], row[2]],
        },
        insert(table, row),
      ],
    },
    claimLabel: (keep) =>
      keep
        ? 'SELECT … ORDER BY id LIMIT n, then UPDATE … SET status = 4 WHERE id IN (…), loop'
        : returning
          ? 'DELETE … ORDER BY id LIMIT n RETURNING loop'
          : 'SELECT … ORDER BY id LIMIT n, then DELETE … WHERE id IN (…), loop',
    async claim(connection: BenchConnection<unknown>, c: PlainClaim) {
      const t = quote(c.table);
      const where = `outbox = ? AND \`partition\` = ? AND status = 0 AND id > ? ORDER BY id LIMIT ?`;
      const values = ['bench', c.partition, c.afterId, c.limit];
      // One statement where the server returns what it deleted (MariaDB 10.0+); MySQL 8 has no
      // RETURNING: the rows, then their removal, each in autocommit.
      if (!c.keep && returning)
        return connection.query(`DELETE FROM ${t} WHERE ${where} RETURNING ${COLUMNS}`, values);
      const rows = await connection.query(`SELECT ${COLUMNS} FROM ${t} WHERE ${where}`, values);
      if (rows.length === 0) return rows;
      const ids = rows.map((row) => row.id);
      const list = ids.map(() => '?').join(', ');
      await connection.query(
        c.keep
          ? `UPDATE ${t} SET status = 4, delivered_at = ${NOW_MS}, next_attempt_at = NULL WHERE id IN (${list})`
          : `DELETE FROM ${t} WHERE id IN (${list})`,
        ids,
      );
      return rows;
    },
    head: (table, afterId) => ({
      text: `SELECT ${COLUMNS} FROM ${quote(table)} WHERE outbox = ? AND \`partition\` = ? AND status = 0${afterId === undefined ? '' : ' AND id > ?'} ORDER BY id LIMIT 100`,
      values: afterId === undefined ? ['bench', 0] : ['bench', 0, afterId],
    }),
    groupedCount: (table) => ({
      text: `SELECT outbox, status, count(*) FROM ${quote(table)} GROUP BY outbox, status`,
      values: [],
    }),
    prune: (table, olderThanSeconds) => ({
      text: `DELETE FROM ${quote(table)} WHERE outbox = ? AND status = 4 AND delivered_at < ${NOW_MS} - ?`,
      values: ['bench', olderThanSeconds * 1000],
    }),
    zeroTallies: (table, outbox, count) => ({
      text: `INSERT INTO ${quote(`${table}_tallies`)} (outbox, \`partition\`, pending, dead, delivered) SELECT ?, 0, IF(n % 2 = 0, 1, -1), 0, 0 FROM ${NUMBERS} WHERE n < ?`,
      values: [outbox, count],
    }),
  };
}

/** The server variables the report shows: durability, memory, autoinc and purge. */
const VARIABLES = [
  'innodb_flush_log_at_trx_commit',
  'sync_binlog',
  'log_bin',
  'innodb_buffer_pool_size',
  'innodb_log_file_size',
  'innodb_doublewrite',
  'innodb_flush_method',
  'innodb_autoinc_lock_mode',
  'innodb_purge_threads',
  'transaction_isolation',
  'tx_isolation',
  'max_connections',
];

export type MysqlBench = BenchDatabase<Mysql2TransactionConnection> & { readonly kind: 'mysql' };

export async function openMysql(url: string): Promise<MysqlBench> {
  const { name, admin: server } = databaseOf(url, '/');
  const admin = await mysql.createConnection({ uri: server });
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${quote(name)}`);
    await admin.query(`CREATE DATABASE ${quote(name)} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`);
  } finally {
    await admin.end();
  }
  // Room for 10 writers and 4 partitions, as on Postgres.
  const pool = mysql.createPool({ uri: url, connectionLimit: 24 });
  const query = async (text: string, values: readonly unknown[] = []): Promise<Row[]> =>
    rowsOf((await pool.query(text, [...values]))[0]);
  const [about] = await query('SELECT VERSION() AS v');
  const version = String(about?.v ?? '');
  const mariadb = /mariadb/i.test(version);
  await query(`CREATE TABLE ${NUMBERS} (n INT NOT NULL PRIMARY KEY) ENGINE=InnoDB`);
  const digits =
    'SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9';
  const places = [1, 10, 100, 1_000, 10_000, 100_000];
  await query(
    `INSERT INTO ${NUMBERS} (n) SELECT ${places.map((p, i) => `${p} * d${i}.d`).join(' + ')} AS n FROM ${places.map((_, i) => `(${digits}) AS d${i}`).join(' CROSS JOIN ')} HAVING n < ?`,
    [CHUNK],
  );

  const connect = async (): Promise<BenchConnection<Mysql2TransactionConnection>> => {
    const connection = await pool.getConnection();
    return {
      tx: connection,
      query: async (text, values = []) => rowsOf((await connection.query(text, [...values]))[0]),
      release: () => connection.release(),
    };
  };

  const db: MysqlBench = {
    kind: 'mysql',
    title: mariadb ? 'MariaDB' : 'MySQL',
    dialect: mysqlDialect,
    url,
    plain: plainSql(mariadb),
    adapter: () => mysql2(pool),
    query,
    connect,
    quote,
    async environment() {
      const variables = await query(
        `SHOW GLOBAL VARIABLES WHERE Variable_name IN (${VARIABLES.map(() => '?').join(', ')})`,
        VARIABLES,
      );
      const shown = variables.map(({ Variable_name: n, Value: v }) =>
        /_size$/.test(String(n)) ? `${n} ${Number(v) / 2 ** 20} MB` : `${n} ${v}`,
      );
      return [
        ['Database', `${version} on the same machine (local TCP), database ${name}, through mysql2`],
        ['Database settings', `${shown.join(', ')} (server defaults otherwise)`],
        ['Drivers', `mysql2 ${packageVersion('mysql2')}`],
      ];
    },
    async dropTables(table) {
      const names = ['', '_leases', '_nodes', '_config', '_tallies', '_groups'].map((s) =>
        quote(`${table}${s}`),
      );
      await query(`DROP TABLE IF EXISTS ${names.join(', ')}`);
    },
    async truncate(tables) {
      for (const name of tables) await query(`TRUNCATE TABLE ${quote(name)}`);
    },
    // No CHECKPOINT to ask for: InnoDB flushes its dirty pages continuously (a fuzzy checkpoint).
    checkpoint: async () => undefined,
    fill: (options) => fill(connect, options),
    async vacuum(table) {
      await query(`ANALYZE TABLE ${quote(table)}`);
      return `ANALYZE TABLE, ${await purged()}`;
    },
    async lastDrawnId(table) {
      const [status] = await query(`SHOW TABLE STATUS LIKE ?`, [table]);
      return Number(status?.Auto_increment ?? 1) - 1;
    },
    timeStatement: (q, iterations, warmup = 10) =>
      timeOnConnection(db, iterations, warmup, (c) => c.query(q.text, q.values)),
    serverTimeLabel: 'SHOW PROFILES',
    serverTime: (queries, iterations = 15) =>
      serverTimeOf(db, iterations, async (c) => {
        await c.query('SET profiling = 1');
        for (const q of queries) await c.query(q.text, q.values);
        // SHOW PROFILES lists itself not: the last entries are the statements just run.
        const profiles = await c.query('SHOW PROFILES');
        return profiles.slice(-queries.length).reduce((sum, p) => sum + Number(p.Duration) * 1000, 0);
      }),
    explain: (queries) =>
      rolledBack(db, async (c) => {
        const plans: string[] = [];
        for (const q of queries) {
          if (!/^\s*\(?\s*(SELECT|UPDATE|DELETE|INSERT)/i.test(q.text)) {
            await c.query(q.text, q.values);
            plans.push(`(${q.text.split(/\s/)[0]}: run, no plan)`);
            continue;
          }
          const rows = await c.query(`${mariadb ? 'ANALYZE' : 'EXPLAIN ANALYZE'} ${q.text}`, q.values);
          plans.push(textTable(rows));
        }
        return plans.join('\n\n');
      }),
    async close() {
      await pool.end();
      const closing = await mysql.createConnection({ uri: server });
      try {
        await closing.query(`DROP DATABASE IF EXISTS ${quote(name)}`);
      } finally {
        await closing.end();
      }
    },
  };

  /** Waits (up to 30 s) for InnoDB's purge to remove what deletes left, as vacuum would. */
  async function purged(): Promise<string> {
    const length = async () =>
      Number(
        (
          await query(
            `SELECT count FROM information_schema.INNODB_METRICS WHERE name = 'trx_rseg_history_len'`,
          )
        )[0]?.count ?? 0,
      );
    const started = performance.now();
    const before = await length();
    let now = before;
    while (now > 100 && performance.now() - started < 30_000) {
      await sleep(250);
      now = await length();
    }
    return `InnoDB history list ${before} → ${now} in ${((performance.now() - started) / 1000).toFixed(1)} s`;
  }
  return db;
}

/** Result rows as a text table (the plan of `ANALYZE`). */
function textTable(rows: readonly Row[]): string {
  const first = rows[0];
  if (first === undefined) return '(no rows)';
  const columns = Object.keys(first);
  const lines = [columns, ...rows.map((row) => columns.map((c) => String(row[c] ?? 'NULL')))];
  const widths = columns.map((_, i) => Math.max(...lines.map((line) => line[i]!.length)));
  return lines.map((line) => line.map((cell, i) => cell.padEnd(widths[i]!)).join('  ')).join('\n');
}

/**
 * Fills a message table the way outboxer's publish would (same columns, same partition for each
 * group key, 200-byte payloads, a tally a statement and partition), in bulk SQL, in id order.
 */
async function fill(
  connect: () => Promise<BenchConnection<Mysql2TransactionConnection>>,
  o: FillOptions,
): Promise<void> {
  const status = o.status ?? 0;
  const prefix = o.keyPrefix ?? 'order:';
  const parts =
    o.fixedGroupKey === undefined
      ? partitionsOfGroups(o.groups, o.partitions, prefix)
      : [hashGroupKey(o.fixedGroupKey) % o.partitions];
  const partitionOf = (g: number): number => parts[o.fixedGroupKey === undefined ? g % o.groups : 0]!;
  const from = o.from ?? 0;
  const connection = await connect();
  try {
    // Partitions of the group keys, where there is more than one: a lookup table for the fill.
    const keyed = o.fixedGroupKey === undefined && o.partitions > 1;
    if (keyed) {
      await connection.query(`DROP TABLE IF EXISTS bench_fill_keys`);
      await connection.query(`CREATE TABLE bench_fill_keys (k INT NOT NULL PRIMARY KEY, p INT NOT NULL)`);
      for (let k = 0; k < o.groups; k += 1000) {
        const slice = parts.slice(k, k + 1000);
        await connection.query(
          `INSERT INTO bench_fill_keys (k, p) VALUES ${slice.map(() => '(?, ?)').join(', ')}`,
          slice.flatMap((p, i) => [k + i, p]),
        );
      }
    }
    for (let start = 0; start < o.count; start += CHUNK) {
      const end = Math.min(o.count, start + CHUNK);
      const values: unknown[] = [];
      const add = (value: unknown): string => (values.push(value), '?');
      const outbox = add(o.outbox);
      const partition =
        o.fixedGroupKey !== undefined || o.partitions === 1
          ? add(parts[0] ?? 0)
          : `(SELECT p FROM bench_fill_keys WHERE k = g MOD ${add(o.groups)})`;
      const key =
        o.fixedGroupKey !== undefined
          ? add(o.fixedGroupKey)
          : `CONCAT(${add(prefix)}, g MOD ${add(o.groups)})`;
      // Placeholders are positional: each is added in the order the text reads it.
      const statusValue = add(status);
      const deliveredAt = status === 4 ? `${NOW_MS} - ${add((o.deliveredSecondsAgo ?? 0) * 1000)}` : 'NULL';
      const text = `INSERT INTO ${quote(o.table)} (outbox, \`partition\`, group_key, type, payload, headers, status, inserted_at, delivered_at)
SELECT ${outbox}, ${partition}, ${key}, NULL, ${sqlPayload('g', 'mysql')}, NULL, ${statusValue}, ${NOW_MS}, ${deliveredAt}
FROM (SELECT n + ${add(from + start)} AS g FROM ${NUMBERS} WHERE n < ${add(end - start)}) AS s ORDER BY g`;
      // The rows and their tallies commit together, as a publish's do.
      const counts = new Map<number, number>();
      for (let g = from + start; g < from + end; g += 1) {
        const p = partitionOf(g);
        counts.set(p, (counts.get(p) ?? 0) + 1);
      }
      const tallies = [...counts].map(([p, count]) => [
        o.outbox,
        p,
        status < 3 ? count : 0,
        status === 3 ? count : 0,
        status === 4 ? count : 0,
      ]);
      await connection.query('BEGIN');
      await connection.query(text, values);
      await connection.query(
        `INSERT INTO ${quote(`${o.table}_tallies`)} (outbox, \`partition\`, pending, dead, delivered) VALUES ${tallies.map(() => '(?, ?, ?, ?, ?)').join(', ')}`,
        tallies.flat(),
      );
      await connection.query('COMMIT');
    }
    if (keyed) await connection.query(`DROP TABLE IF EXISTS bench_fill_keys`);
  } finally {
    connection.release();
  }
}
