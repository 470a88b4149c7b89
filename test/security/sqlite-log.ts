/**
 * Logs every statement better-sqlite3 runs: the wrapper the suite installs in its own process, and
 * a preload for the real CLI (`node --import tsx --import ./test/security/sqlite-log.ts …`) that
 * appends each statement to the file named by OUTBOXER_SQLITE_LOG, one JSON line each.
 */
import { appendFileSync } from 'node:fs';
import { createRequire } from 'node:module';

export interface SqliteStatement {
  /** The file of the connection that ran it. */
  readonly file: string;
  readonly text: string;
  readonly values: readonly unknown[];
}

type DatabaseClass = new (file: string) => {
  prepare(text: string): object;
  close(): void;
};

/** Wraps `Statement.prototype.run/get/all/iterate` and `Database.prototype.exec`: once per process. */
export function logBetterSqlite3(record: (statement: SqliteStatement) => void): void {
  const Database = createRequire(import.meta.url)('better-sqlite3') as DatabaseClass;
  const probe = new Database(':memory:');
  const statement = Object.getPrototypeOf(probe.prepare('SELECT 1')) as Record<string, unknown>;
  probe.close();
  type This = { source: string; database: { name: string } };
  for (const method of ['run', 'get', 'all', 'iterate']) {
    const original = statement[method] as (this: This, ...args: unknown[]) => unknown;
    statement[method] = function (this: This, ...args: unknown[]) {
      // Parameters come spread (`run(a, b)`) or as one array (`run([a, b])`, as Kysely does).
      const values = args.length === 1 && Array.isArray(args[0]) ? (args[0] as unknown[]) : args;
      record({ file: this.database.name, text: this.source, values });
      return original.apply(this, args);
    };
  }
  const database = Database.prototype as unknown as Record<string, unknown>;
  const exec = database.exec as (this: { name: string }, text: string) => unknown;
  database.exec = function (this: { name: string }, text: string) {
    record({ file: this.name, text, values: [] });
    return exec.call(this, text);
  };
}

const logFile = process.env.OUTBOXER_SQLITE_LOG;
if (logFile !== undefined && logFile !== '') {
  logBetterSqlite3((statement) => appendFileSync(logFile, `${JSON.stringify(statement)}\n`));
}
