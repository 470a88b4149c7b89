/**
 * What differs per database in a chaos run, behind one interface: the throwaway server the faults
 * restart, crash, freeze and cut, a pool with its outboxer adapter, and the few statements whose
 * SQL is not common to both. Everything else (the harness, the processes, the checker) is written
 * once, in SQL that Postgres and MySQL both read, with `?` placeholders.
 *
 * `CHAOS_DB` picks the outbox's database: `postgres` (default) or `mysql` (MariaDB 10.6+ or
 * MySQL 8, through `outboxer/mysql2`). The destination is a Postgres table in both runs: it stands
 * for the broker, not for the database under test.
 */
import type { DatabaseAdapter, Row } from 'outboxer';
import { mariadbDatabase } from './mariadb-database.js';
import { postgresDatabase } from './postgres-database.js';

export type DatabaseKind = 'postgres' | 'mysql';

/** The faults aimed at the outbox's database (faults.ts); what each does depends on the database. */
export type DatabaseFault = 'db-restart' | 'db-crash' | 'db-terminate' | 'db-freeze';

/** A throwaway database server, on a free port of 127.0.0.1, that the harness may hurt. */
export interface ChaosServer {
  readonly port: number;
  /** The server's log file. */
  readonly logFile: string;
  /** Makes the server's data directory and starts it. */
  create(): Promise<void>;
  createDatabase(name: string): Promise<void>;
  /** A connection string for `database`, as the pool and `queryOnce` take it. */
  url(database: string): string;
  /** A clean shutdown (every connection cut), then start; the server answers when this returns. */
  restart(): Promise<void>;
  /** The server killed without a shutdown, then started: crash recovery. */
  crash(): Promise<void>;
  /** SIGSTOP (true) or SIGCONT (false) of every server process: a hung server. */
  freeze(frozen: boolean): void;
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  /** Synchronous, for exit handlers: kill the server, remove its directory. */
  destroySync(): void;
}

/** A connection in an open transaction, taken from a {@link ChaosPool}. */
export interface ChaosTransaction {
  /** What `outboxer.publish` takes: the client library's connection. */
  readonly connection: unknown;
  query<T extends Row>(text: string, values?: readonly unknown[]): Promise<T[]>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
  /** Back to the pool; with the error that broke it, closed instead. */
  release(broken?: Error): void;
}

/** A pool on the outbox's database, and the outboxer adapter over it. */
export interface ChaosPool {
  readonly adapter: DatabaseAdapter<unknown, false>;
  /** One statement (`?` placeholders) on a pooled connection. */
  query<T extends Row>(text: string, values?: readonly unknown[]): Promise<T[]>;
  /** A pooled connection with a transaction begun on it. */
  begin(): Promise<ChaosTransaction>;
  end(): Promise<void>;
}

export interface PoolOptions {
  max: number;
  /** Shown by the server beside the connection, where it can show one. */
  name: string;
  /**
   * Leaves out the 'error' listener on checked-out connections (Postgres: see finding 1 in
   * docs/reliability.md, `CHAOS_NO_WORKAROUND`).
   */
  bare?: boolean;
}

export interface ChaosDatabase {
  readonly kind: DatabaseKind;
  /** For logs and the report: 'PostgreSQL 15', 'MariaDB' … */
  readonly label: string;
  /** Whether outboxes may use `notify` (LISTEN/NOTIFY). */
  readonly notifications: boolean;
  /** A throwaway server, not yet created. */
  server(name: string): ChaosServer;
  pool(url: string, options: PoolOptions): ChaosPool;
  /**
   * One statement on a connection of its own, given up after `timeout` ms: the harness asks while
   * faults play, and a frozen server never answers.
   */
  queryOnce<T extends Row>(
    url: string,
    text: string,
    values?: readonly unknown[],
    timeout?: number,
  ): Promise<T[]>;
  /**
   * The DDL of the harness's own tables: `orders` (id text key, version bigint: one row per group,
   * whose lock serialises its publishers) and `published` (message_id, outbox, group_key, seq,
   * hash, publisher, poison, fail_times, and `at`, the insert time, to the microsecond or
   * millisecond).
   */
  readonly tables: readonly string[];
  /** Cuts every client connection to the database of `url` but its own; returns how many. */
  terminateConnections(url: string): Promise<number>;
  /** What each database fault does on this database, for the report and docs/reliability.md. */
  readonly faults: Readonly<Record<DatabaseFault, string>>;
}

export function databaseKind(value = process.env.CHAOS_DB ?? 'postgres'): DatabaseKind {
  if (value === 'postgres' || value === 'mysql') return value;
  if (value === 'mariadb') return 'mysql';
  throw new Error(`CHAOS_DB must be postgres or mysql (MariaDB), not ${JSON.stringify(value)}`);
}

export function chaosDatabase(kind: DatabaseKind): ChaosDatabase {
  return kind === 'mysql' ? mariadbDatabase : postgresDatabase;
}
