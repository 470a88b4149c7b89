/**
 * Postgres plans in tests: `EXPLAIN (FORMAT JSON)` of a statement, its nodes flattened (each node
 * before its children), for tests that check which scans a statement's plan uses.
 */

/** A node of a JSON plan, as far as the tests read it. */
export interface PlanNode {
  readonly 'Node Type': string;
  readonly 'Relation Name'?: string;
  readonly Alias?: string;
  readonly 'Index Name'?: string;
  readonly 'Index Cond'?: string;
  readonly Filter?: string;
  readonly Plans?: readonly PlanNode[];
}

type Query = (text: string, values: unknown[]) => Promise<unknown[]>;

/** The nodes of the plan Postgres picks for `text` with `values`, without running it. */
export async function explainNodes(
  query: Query,
  text: string,
  values: readonly unknown[],
): Promise<PlanNode[]> {
  const [row] = (await query(`EXPLAIN (FORMAT JSON) ${text}`, [...values])) as [
    { 'QUERY PLAN': [{ Plan: PlanNode }] },
  ];
  const nodes: PlanNode[] = [];
  const visit = (node: PlanNode): void => {
    nodes.push(node);
    for (const child of node.Plans ?? []) visit(child);
  };
  visit(row['QUERY PLAN'][0].Plan);
  return nodes;
}
