/**
 * Node's built-in SQLite where this runtime has one that `outboxer/node-sqlite` can use (Node
 * 22.16+: `DatabaseSync` with `isTransaction`), and otherwise the reason its tests are skipped.
 * Loaded with `process.getBuiltinModule`, so that a test file importing this still loads on a Node
 * without `node:sqlite` and reports its tests as skipped instead of failing to import.
 */
import type * as NodeSqlite from 'node:sqlite';

const loaded = process.getBuiltinModule?.('node:sqlite') as typeof NodeSqlite | undefined;
/** Whether a `DatabaseSync` has `isTransaction` (an own property on Node 24, a getter on 22). */
function hasIsTransaction(module: typeof NodeSqlite): boolean {
  const probe = new module.DatabaseSync(':memory:');
  try {
    return typeof (probe as { isTransaction?: unknown }).isTransaction === 'boolean';
  } finally {
    probe.close();
  }
}

const usable = loaded !== undefined && hasIsTransaction(loaded);

/** `DatabaseSync`, or undefined where this Node has no usable node:sqlite. */
export const DatabaseSync: typeof NodeSqlite.DatabaseSync | undefined = usable
  ? loaded!.DatabaseSync
  : undefined;

/** Why the node:sqlite tests are skipped on this runtime; undefined where they run. */
export const nodeSqliteMissing: string | undefined = usable
  ? undefined
  : loaded === undefined
    ? `node:sqlite needs Node 22.16+ (this is Node ${process.versions.node}, which has no node:sqlite)`
    : `outboxer/node-sqlite needs Node 22.16+ (Node ${process.versions.node}'s DatabaseSync has no isTransaction)`;
