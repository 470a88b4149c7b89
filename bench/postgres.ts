/**
 * PostgreSQL for the benchmark (the default, `BENCH_DB=postgres`): the pool, the fixtures (bulk
 * fills, VACUUM, plans, server times) and the plain SQL each row is measured against.
 */
import { createHash } from 'node:crypto';
import pg from 'pg';
import { hashGroupKey, type Row } from 'outboxer';
import { nodePostgres, postgresDialect } from 'outboxer/pg';
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
import { packageVersion, partitionsOfGroups, sqlPayload } from './support.js';

/** The columns outboxer's poll reads, so both sides move the same bytes. */
const POLL_COLUMNS = `id, partition, group_key, type, payload::text AS payload, headers::text AS headers, attempts, last_error, next_attempt_at, inserted_at, status`;
const COLUMNS = '(outbox, partition, group_key, type, payload, headers)';

const quote = (name: string): string => `"${name}"`;

const plain: PlainSql = {
  insert: (table, row) => [
    { text: `INSERT INTO "${table}" ${COLUMNS} VALUES ($1, $2, $3, $4, $5, $6)`, values: row },
  ],
  insertMany(table, rows) {
    const tuples = rows.map((_, i) => {
      const b = i * 6;
      return `($${b + 1}, $${b + 2}, $${b + 3}, $${b + 4}, $${b + 5}, $${b + 6})`;
    });
    return [{ text: `INSERT INTO "${table}" ${COLUMNS} VALUES ${tuples.join(', ')}`, values: rows.flat() }];
  },
  locked: {
    label: 'INSERT … FROM (SELECT pg_advisory_xact_lock(…)), one statement',
    insert: (table, row) => [
      {
        text: `INSERT INTO "${table}" ${COLUMNS} SELECT $1, $2, $3, $4, $5::json, $6::json FROM (SELECT pg_advisory_xact_lock(hashtextextended($3, 0))) AS l`,
        values: row,
      },
    ],
  },
  notified: {
    label: 'INSERT … FROM (SELECT pg_notify(…)), one statement',
    insert: (table, row) => [
      {
        text: `INSERT INTO "${table}" ${COLUMNS} SELECT $1, $2, $3, $4, $5::json, $6::json FROM (SELECT pg_notify($7, $8)) AS n`,
        values: [...row, 'outboxer', 'outboxer:bench:0'],
      },
    ],
  },
  // The fastest plain form: `id IN (SELECT …)` can turn into a hash join over the whole table.
  claimLabel: (keep) => `${keep ? 'UPDATE … SET status = 4' : 'DELETE'} … RETURNING loop`,
  claim(connection: BenchConnection<unknown>, c: PlainClaim) {
    const select = `SELECT id FROM "${c.table}" WHERE outbox = $1 AND partition = $2 AND status = 0 AND id > $3 ORDER BY id LIMIT $4`;
    const text = c.keep
      ? `UPDATE "${c.table}" SET status = 4, delivered_at = now(), next_attempt_at = NULL WHERE id = ANY(ARRAY(${select})) RETURNING ${POLL_COLUMNS}`
      : `DELETE FROM "${c.table}" WHERE id = ANY(ARRAY(${select})) RETURNING ${POLL_COLUMNS}`;
    return connection.query(text, ['bench', c.partition, c.afterId, c.limit]);
  },
  head: (table, afterId) => ({
    text: `SELECT ${POLL_COLUMNS} FROM "${table}" WHERE outbox = $1 AND partition = $2 AND status = 0${afterId === undefined ? '' : ' AND id > $3'} ORDER BY id LIMIT 100`,
    values: afterId === undefined ? ['bench', 0] : ['bench', 0, afterId],
  }),
  groupedCount: (table) => ({
    text: `SELECT outbox, status, count(*) FROM "${table}" GROUP BY outbox, status`,
    values: [],
  }),
  prune: (table, olderThanSeconds) => ({
    text: `DELETE FROM "${table}" WHERE outbox = $1 AND status = 4 AND delivered_at < now() - $2 * interval '1 second'`,
    values: ['bench', olderThanSeconds],
  }),
  zeroTallies: (table, outbox, count) => ({
    text: `INSERT INTO "${table}_tallies" (outbox, partition, pending, dead, delivered) SELECT $1, 0, CASE WHEN g % 2 = 0 THEN 1 ELSE -1 END, 0, 0 FROM generate_series(1, $2::int) AS g`,
    values: [outbox, count],
  }),
};

const SETTINGS = [
  'shared_buffers',
  'synchronous_commit',
  'fsync',
  'wal_level',
  'max_wal_size',
  'checkpoint_timeout',
  'work_mem',
  'max_parallel_workers_per_gather',
  'jit',
  'autovacuum',
];

export interface PostgresBench extends BenchDatabase<pg.PoolClient> {
  readonly kind: 'postgres';
  /** The pool, for the Postgres-only rows (peers, memory, dashboard). */
  readonly pool: pg.Pool;
}

/** Creates the benchmark database when it does not exist (through the server's `postgres` db). */
async function ensureDatabase(url: string): Promise<void> {
  const { name, admin } = databaseOf(url, '/postgres');
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  try {
    const { rows } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (rows.length === 0) await client.query(`CREATE DATABASE "${name}"`);
  } finally {
    await client.end();
  }
}

/** Drops a message table, its companions, its TRUNCATE trigger's function and its prune function. */
export async function dropTables(pool: pg.Pool, table: string): Promise<void> {
  await pool.query(
    `DROP TABLE IF EXISTS "${table}", "${table}_leases", "${table}_nodes", "${table}_config", "${table}_tallies" CASCADE`,
  );
  await pool.query(`DROP FUNCTION IF EXISTS "${table}_truncated"()`);
  await pool.query(`DROP FUNCTION IF EXISTS "${table}_prune"(text, double precision, integer)`);
}

/**
 * Fills a message table the way outboxer's publish would (same columns, same partition for each
 * group key, 200-byte payloads), but in bulk SQL so that a million rows take seconds.
 */
export async function fill(pool: pg.Pool, o: FillOptions): Promise<void> {
  const chunk = 250_000;
  // Tallied as publish tallies (one row a statement and partition), where the table has tallies.
  const tallies = `"${o.table}_tallies"`;
  const [{ tallied }] = (await pool.query(`SELECT to_regclass($1) IS NOT NULL AS tallied`, [tallies]))
    .rows as [{ tallied: boolean }];
  // Every row has the same status: its count goes to its figure (pending, dead, delivered).
  const status = o.status ?? 0;
  const figures = [status < 3, status === 3, status === 4]
    .map((mine) => (mine ? 'count(*)' : '0'))
    .join(', ');
  const prefix = o.keyPrefix ?? 'order:';
  const parts = partitionsOfGroups(o.groups, o.partitions, prefix);
  const from = o.from ?? 0;
  for (let start = 0; start < o.count; start += chunk) {
    const end = Math.min(o.count, start + chunk);
    const values: unknown[] = [];
    const add = (value: unknown, type: string): string => `$${values.push(value)}::${type}`;
    const outbox = add(o.outbox, 'text');
    const series = `generate_series(${add(from + start, 'bigint')}, ${add(from + end - 1, 'bigint')})`;
    let partition: string;
    let key: string;
    if (o.fixedGroupKey !== undefined) {
      partition = add(hashGroupKey(o.fixedGroupKey) % o.partitions, 'int');
      key = add(o.fixedGroupKey, 'text');
    } else {
      const groups = add(o.groups, 'int');
      partition = `(${add(parts, 'int[]')})[(g % ${groups}) + 1]`;
      key = `${add(prefix, 'text')} || (g % ${groups})`;
    }
    const deliveredAt =
      status === 4 ? `now() - ${add(o.deliveredSecondsAgo ?? 0, 'int')} * interval '1 second'` : 'NULL';
    const insert = `INSERT INTO "${o.table}" (outbox, partition, group_key, type, payload, headers, status, delivered_at)
       SELECT ${outbox}, ${partition}, ${key}, NULL, ${sqlPayload('g')}::json, NULL, ${add(status, 'smallint')}, ${deliveredAt}
       FROM ${series} AS g`;
    await pool.query(
      tallied
        ? `WITH filled AS (${insert} RETURNING partition)
           INSERT INTO ${tallies} (outbox, partition, pending, dead, delivered)
           SELECT ${outbox}, partition, ${figures} FROM filled GROUP BY partition`
        : insert,
      values,
    );
  }
}

/** VACUUM (ANALYZE): sets hint bits and the visibility map, as autovacuum would on a settled table. */
export async function vacuum(pool: pg.Pool, table: string): Promise<string> {
  await pool.query(`VACUUM (ANALYZE) "${table}"`);
  return 'VACUUM (ANALYZE)';
}

/**
 * Collects the plans of the statements run inside functions, sent to `connection` as notices for
 * the rest of its transaction (auto_explain, which needs a superuser: none otherwise), while
 * `during` runs.
 */
async function withNestedPlans<T>(
  connection: BenchConnection<pg.PoolClient>,
  during: (plans: string[]) => Promise<T>,
): Promise<T> {
  const plans: string[] = [];
  const onNotice = (notice: { message?: string }) => {
    if (notice.message?.includes('plan:')) plans.push(notice.message);
  };
  await connection.query('SAVEPOINT nested_plans');
  try {
    await connection.query(`LOAD 'auto_explain'`);
    for (const setting of [
      'log_min_duration = 0',
      'log_nested_statements = on',
      'log_analyze = on',
      'log_buffers = on',
      'log_level = notice',
    ])
      await connection.query(`SET LOCAL auto_explain.${setting}`);
    connection.tx.on('notice', onNotice);
  } catch {
    await connection.query('ROLLBACK TO SAVEPOINT nested_plans');
  }
  try {
    return await during(plans);
  } finally {
    connection.tx.off('notice', onNotice);
  }
}

export async function openPostgres(url: string): Promise<PostgresBench> {
  await ensureDatabase(url);
  // Room for 10 writers, 4 partitions and a listener.
  const pool = new pg.Pool({ connectionString: url, max: 24 });
  pool.on('error', () => undefined); // an idle client dropped by the server; the next query reconnects
  const query = async (text: string, values: readonly unknown[] = []): Promise<Row[]> =>
    (await pool.query(text, values as unknown[])).rows as Row[];
  const db: PostgresBench = {
    kind: 'postgres',
    title: 'PostgreSQL',
    dialect: postgresDialect,
    url,
    plain,
    pool,
    adapter: () => nodePostgres(pool),
    query,
    async connect() {
      const client = await pool.connect();
      return {
        tx: client,
        query: async (text, values = []) => (await client.query(text, values as unknown[])).rows as Row[],
        release: () => client.release(),
      };
    },
    quote,
    async environment() {
      const [version] = await query('SELECT version() AS v');
      const settings = await query(
        'SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1) ORDER BY name',
        [SETTINGS],
      );
      const shown = settings.map((row) => {
        const s = row as { name: string; setting: string; unit: string | null };
        if (s.unit === '8kB') return `${s.name} ${(Number(s.setting) * 8) / 1024} MB`;
        if (s.unit === 'kB') return `${s.name} ${Number(s.setting) / 1024} MB`;
        if (s.unit === 'MB') return `${s.name} ${s.setting} MB`;
        return `${s.name} ${s.setting}${s.unit ? ` ${s.unit}` : ''}`;
      });
      return [
        [
          'Database',
          `${String(version?.v).split(',')[0]} on the same machine (local TCP), database ${new URL(url).pathname.slice(1)}`,
        ],
        ['Database settings', `${shown.join(', ')} (server defaults otherwise)`],
        [
          'Drivers',
          `pg ${packageVersion('pg')}; peers: pg-boss ${packageVersion('pg-boss')}, pg-transactional-outbox ${packageVersion('pg-transactional-outbox')}`,
        ],
      ];
    },
    dropTables: (table) => dropTables(pool, table),
    async truncate(tables) {
      await pool.query(`TRUNCATE ${tables.map(quote).join(', ')}`);
    },
    async checkpoint() {
      await pool.query('CHECKPOINT');
    },
    fill: (options) => fill(pool, options),
    vacuum: (table) => vacuum(pool, table),
    async lastDrawnId(table) {
      const [row] = await query(
        `SELECT pg_sequence_last_value(pg_get_serial_sequence($1, 'id'))::int AS id`,
        [`"${table}"`],
      );
      return Number(row?.id ?? 0);
    },
    timeStatement(q, iterations, warmup = 10) {
      // As the pg adapter sends it: a statement the dialect marks `prepare` is a named one, which
      // Postgres plans for its values five times and then runs on its generic plan.
      const name =
        q.prepare === true
          ? `bench_${createHash('sha256').update(q.text).digest('hex').slice(0, 24)}`
          : undefined;
      return timeOnConnection(db, iterations, warmup, ({ tx }) =>
        tx.query({ name, text: q.text, values: q.values as unknown[] }),
      );
    },
    serverTimeLabel: 'EXPLAIN ANALYZE',
    serverTime: (queries, iterations = 15) =>
      serverTimeOf(db, iterations, async (c) => {
        let total = 0;
        for (const q of queries) {
          const rows = await c.query(`EXPLAIN (ANALYZE, TIMING OFF) ${q.text}`, q.values);
          const last = String(rows.at(-1)?.['QUERY PLAN'] ?? '');
          total += Number(/Execution Time: ([0-9.]+) ms/.exec(last)?.[1] ?? NaN);
        }
        return total;
      }),
    async listen(channel) {
      const listener = new pg.Client({ connectionString: url });
      let received = 0;
      await listener.connect();
      listener.on('notification', () => (received += 1));
      await listener.query(`LISTEN ${channel}`);
      return { received: () => received, close: () => listener.end() };
    },
    explain: (queries) =>
      rolledBack(db, (c) =>
        withNestedPlans(c, async (nested) => {
          const plans: string[] = [];
          for (const q of queries) {
            nested.length = 0;
            const rows = await c.query(`EXPLAIN (ANALYZE, BUFFERS) ${q.text}`, q.values);
            plans.push(rows.map((row) => String(row['QUERY PLAN'])).join('\n'));
            // A function's statements (the prune batch is one) are planned inside it.
            const inner = nested.filter((plan) => !plan.includes(q.text));
            if (inner.length > 0) plans.push(`Inside the function:\n${inner.join('\n\n')}`);
          }
          return plans.join('\n\n');
        }),
      ),
    close: () => pool.end(),
  };
  return db;
}
