import { companion, quoteName, type QualifiedName } from '../../core/identifiers.js';

/**
 * The quoted names of a message table's companions, as every statement family writes them. Status
 * values: `Status` of src/core/sql.ts (ready, retry, held, dead, delivered; see docs/ordering.md).
 * Each statement's comment names the index it reads.
 */
export interface Tables {
  readonly messages: string;
  readonly leases: string;
  readonly nodes: string;
  readonly tallies: string;
}

export function tables(table: QualifiedName): Tables {
  let quoted = quotedTables.get(table);
  if (quoted === undefined) {
    quoted = Object.freeze({
      messages: quoteName(table),
      leases: quoteName(companion(table, 'leases')),
      nodes: quoteName(companion(table, 'nodes')),
      tallies: quoteName(companion(table, 'tallies')),
    });
    quotedTables.set(table, quoted);
  }
  return quoted;
}

// Quoted once per table object (an outbox keeps its own): every publish and poll names the tables,
// and checking and quoting four names each time was a good part of a publish's own CPU (with the
// one-row text of publish.ts, a third: docs/benchmarks.md, "Figures behind decisions").
const quotedTables = new WeakMap<QualifiedName, Tables>();

/** `<table>_config`: what every node of an outbox agrees on, and when it last recounted. */
export function configTable(table: QualifiedName): string {
  return quoteName(companion(table, 'config'));
}
