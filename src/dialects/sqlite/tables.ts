import { companion, quoteName, type QualifiedName } from '../../core/identifiers.js';

/**
 * The quoted names of a message table's companions, as every statement family writes them. Status
 * values: `Status` of src/core/sql.ts (ready, retry, held, dead, delivered; see docs/ordering.md).
 */
export interface Tables {
  readonly messages: string;
  readonly leases: string;
  readonly nodes: string;
  /** `<table>_tallies`: rows per outbox, partition, status and grouped (see sqlite-schema.ts). */
  readonly tallies: string;
}

export function tables(table: QualifiedName): Tables {
  return {
    messages: quoteName(table),
    leases: quoteName(companion(table, 'leases')),
    nodes: quoteName(companion(table, 'nodes')),
    tallies: quoteName(companion(table, 'tallies')),
  };
}

/** `<table>_config`: what every node of an outbox agrees on. */
export function configTable(table: QualifiedName): string {
  return quoteName(companion(table, 'config'));
}
