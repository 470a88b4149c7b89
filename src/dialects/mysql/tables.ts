import { companion, quoteMysqlName, type QualifiedName } from '../../core/identifiers.js';

/**
 * The quoted names (backticks) of a message table's companions, as every statement family writes
 * them. Status values: `Status` of src/core/sql.ts (ready, retry, held, dead, delivered; see
 * docs/ordering.md). Each statement's comment names the index it reads.
 */
export interface Tables {
  readonly messages: string;
  readonly leases: string;
  readonly nodes: string;
  readonly tallies: string;
  /** One row per group key published with `serializeWrites`, locked by the publishing transaction. */
  readonly groups: string;
  /**
   * The message table read by primary key, for statements that lock rows by id: without the hint,
   * MySQL may walk `_status` (outbox, status, id) and lock every entry it steps over, rows of other
   * partitions included (measured: two workers' settles deadlocked that way).
   */
  messagesById(alias?: string): string;
  /** The message table read by `_groups_status` (outbox, group_key, status), for locks by group. */
  messagesByGroup(alias?: string): string;
  /**
   * The message table read by one of its indexes, for the poll: with the statistics of an empty
   * table (a drained outbox, until InnoDB recalculates them) MariaDB read the ready rows by
   * `_status` across partitions and probed each row's group by `_status` (outbox) too, a scan of
   * the outbox per polled row: seconds per poll at 50,000 rows (docs/benchmarks.md, MariaDB).
   */
  messagesUsing(index: 'ready' | 'retry' | 'groups_status', alias: string): string;
}

export function tables(table: QualifiedName): Tables {
  return {
    messages: quoteMysqlName(table),
    leases: quoteMysqlName(companion(table, 'leases')),
    nodes: quoteMysqlName(companion(table, 'nodes')),
    tallies: quoteMysqlName(companion(table, 'tallies')),
    groups: quoteMysqlName(companion(table, 'groups')),
    messagesById: (alias) =>
      `${quoteMysqlName(table)}${alias === undefined ? '' : ` ${alias}`} FORCE INDEX (PRIMARY)`,
    messagesByGroup: (alias) =>
      `${quoteMysqlName(table)}${alias === undefined ? '' : ` ${alias}`} FORCE INDEX (${quoteMysqlName({ schema: undefined, name: `${table.name}_groups_status` })})`,
    messagesUsing: (index, alias) =>
      `${quoteMysqlName(table)} ${alias} FORCE INDEX (${quoteMysqlName({ schema: undefined, name: `${table.name}_${index}` })})`,
  };
}

/** `<table>_config`: what every node of an outbox agrees on, and when it last recounted. */
export function configTable(table: QualifiedName): string {
  return quoteMysqlName(companion(table, 'config'));
}
