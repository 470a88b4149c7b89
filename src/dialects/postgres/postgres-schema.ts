import { checkedName, companion, quoteName, type QualifiedName } from '../../core/identifiers.js';
import { Status } from '../../core/sql.js';

/**
 * The DDL of one message table and its companions, idempotent. Exported through `outboxer/pg` as
 * {@link postgresSchema} for users' own migration tools.
 *
 * Status: 0 ready, 1 retry (waiting for `next_attempt_at`, blocks its group), 2 held (behind a
 * retrying or parked head of its group), 3 dead (blocks its group with `onDead: 'park'`), 4 delivered (kept for `retention.keep`). Every index is
 * partial, so each holds only the rows one query needs: the poll reads `_ready` and `_retry`, never
 * the held backlog of a blocked group.
 *
 * `<table>_tallies` holds what `counts()` reads: rows of changes to an outbox's figures, one per
 * statement that changes them, written by that statement (see `tally` in shared.ts) and summed
 * into one row per partition by the relays. Created with the figures of the rows already there.
 */
const FIGURE_STATUSES = {
  pending: `status < ${Status.dead}`,
  dead: `status = ${Status.dead}`,
  delivered: `status = ${Status.delivered}`,
};

/**
 * An outbox's figures (see `counts()`) as aggregates over the message rows selected, in the order
 * pending, dead, delivered: negated with `sign` '-', named after the figure with `named`.
 */
export function figures(sign: '' | '-' = '', named = false): string {
  return Object.entries(FIGURE_STATUSES)
    .map(([name, where]) => `${sign}count(*) FILTER (WHERE ${where})${named ? ` AS ${name}` : ''}`)
    .join(', ');
}

export function postgresSchema(unchecked: QualifiedName): string[] {
  const table = checkedName(unchecked);
  const t = quoteName(table);
  const name = table.name;
  const leases = quoteName(companion(table, 'leases'));
  const nodes = quoteName(companion(table, 'nodes'));
  const config = quoteName(companion(table, 'config'));
  const tallies = quoteName(companion(table, 'tallies'));
  const truncated = quoteName(companion(table, 'truncated'));
  const truncatedName = `${name}_truncated`;
  const prune = quoteName(companion(table, 'prune'));
  const schema = table.schema === undefined ? [] : [`CREATE SCHEMA IF NOT EXISTS "${table.schema}"`];
  return [
    ...schema,
    // Identity without cache: ids increase in insert order across all sessions.
    `CREATE TABLE IF NOT EXISTS ${t} (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  outbox text NOT NULL,
  partition integer NOT NULL,
  group_key text,
  type text,
  payload json NOT NULL,
  headers json,
  status smallint NOT NULL DEFAULT 0,
  attempts integer NOT NULL DEFAULT 0,
  last_error text,
  next_attempt_at timestamptz,
  failing_since timestamptz,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  delivered_at timestamptz
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 0, autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 1000)`,
    `CREATE INDEX IF NOT EXISTS "${name}_ready" ON ${t} (outbox, partition, id) WHERE status = 0`,
    `CREATE INDEX IF NOT EXISTS "${name}_retry" ON ${t} (outbox, partition, next_attempt_at) WHERE status = 1`,
    // Retrying messages, and dead ones (which block their group when an outbox parks them).
    `CREATE INDEX IF NOT EXISTS "${name}_blocking" ON ${t} (outbox, group_key) WHERE status IN (1, 3)`,
    // The same messages by group key alone, hashed, for the poll's probe of a blocked group (one per
    // ready row polled while the outbox has a blocking message): a hash look-up is one bucket page,
    // where a descent of `_blocking` compares text at every level (2.5 times the cost a probe).
    `CREATE INDEX IF NOT EXISTS "${name}_blocking_keys" ON ${t} USING hash (group_key) WHERE status IN (1, 3)`,
    `CREATE INDEX IF NOT EXISTS "${name}_held" ON ${t} (outbox, group_key, id) WHERE status = 2`,
    `CREATE INDEX IF NOT EXISTS "${name}_dead" ON ${t} (outbox, id) WHERE status = 3`,
    // Prune reads the delivered rows older than the window as a range of this index, which ends
    // at the window: a prune with nothing to remove reads nothing, however many rows are kept.
    `CREATE INDEX IF NOT EXISTS "${name}_delivered_at" ON ${t} (outbox, delivered_at) WHERE status = 4`,
    // Its predecessor, on (outbox, id), made every prune walk all the rows kept.
    `DROP INDEX IF EXISTS ${quoteName(companion(table, 'delivered'))}`,
    `CREATE TABLE IF NOT EXISTS ${leases} (
  outbox text NOT NULL,
  partition integer NOT NULL,
  owner text NOT NULL,
  epoch bigint NOT NULL,
  lease_until timestamptz NOT NULL,
  rewinds bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (outbox, partition)
)`,
    // A lease table created before \`rewinds\` existed gets it. The catalog is read first, so a
    // migrate() that finds the column takes no lock on a table every worker writes.
    `DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '${leases}'::regclass AND attname = 'rewinds' AND NOT attisdropped) THEN
    ALTER TABLE ${leases} ADD COLUMN rewinds bigint NOT NULL DEFAULT 0;
  END IF;
END $$`,
    // Created and filled in one step, so the first figures are the table's own.
    `DO $$ BEGIN
  IF to_regclass('${tallies}') IS NULL THEN
    CREATE TABLE ${tallies} (
      outbox text NOT NULL,
      partition integer NOT NULL,
      pending bigint NOT NULL,
      dead bigint NOT NULL,
      delivered bigint NOT NULL
    ) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 0);
    INSERT INTO ${tallies} (outbox, partition, pending, dead, delivered)
      SELECT outbox, partition, ${figures()} FROM ${t} GROUP BY outbox, partition;
  ELSIF NOT EXISTS (SELECT 1 FROM ${t}) THEN
    -- A message table dropped and created again: no tally of its old rows may stay.
    DELETE FROM ${tallies};
  END IF;
END $$`,
    // TRUNCATE (a test suite's reset) empties the tallies with the messages.
    `CREATE OR REPLACE FUNCTION ${truncated}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM ${tallies};
  RETURN NULL;
END $$`,
    `DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = '${t}'::regclass AND tgname = '${truncatedName}') THEN
    CREATE TRIGGER "${truncatedName}" AFTER TRUNCATE ON ${t} FOR EACH STATEMENT EXECUTE FUNCTION ${truncated}();
  END IF;
END $$`,
    // One batch of prune (housekeeping.ts). A function for the DELETE's row count: tallied from
    // it, the batch deletes without `RETURNING`, which cost a quarter of the statement's rate.
    // The count is the outbox's, on partition 0: the recount compares `delivered` per outbox.
    // Planned for its values at every call, as a statement from the client is. Committed without
    // waiting for its WAL flush (`synchronous_commit` off for the batch's transaction only, as the
    // common settle is): a batch's flush, about a megabyte of WAL, cost a sixth of prune's rate on
    // a slow disk. A crash can forget the last batches, whose rows and tallies come back together
    // and are pruned again.
    `CREATE OR REPLACE FUNCTION ${prune}(target text, older_than_seconds double precision, batch_size integer)
RETURNS integer LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$
DECLARE
  pruned integer;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  DELETE FROM ${t} WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM ${t} WHERE outbox = target AND status = ${Status.delivered}
      AND delivered_at < now() - older_than_seconds * interval '1 second'
    ORDER BY delivered_at LIMIT batch_size));
  GET DIAGNOSTICS pruned = ROW_COUNT;
  IF pruned > 0 THEN
    INSERT INTO ${tallies} (outbox, partition, pending, dead, delivered) VALUES (target, 0, 0, 0, -pruned);
  END IF;
  RETURN pruned;
END $$`,
    `CREATE TABLE IF NOT EXISTS ${nodes} (
  outbox text NOT NULL,
  node_id text NOT NULL,
  last_seen timestamptz NOT NULL,
  PRIMARY KEY (outbox, node_id)
)`,
    `CREATE TABLE IF NOT EXISTS ${config} (
  outbox text PRIMARY KEY,
  partitions integer NOT NULL,
  ordering text NOT NULL,
  serialize_writes boolean NOT NULL,
  on_dead text NOT NULL DEFAULT 'continue',
  updated_at timestamptz NOT NULL DEFAULT now(),
  recounted_at timestamptz NOT NULL DEFAULT now()
)`,
    `DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '${config}'::regclass AND attname = 'recounted_at' AND NOT attisdropped) THEN
    ALTER TABLE ${config} ADD COLUMN recounted_at timestamptz NOT NULL DEFAULT now();
  END IF;
END $$`,
  ];
}
