import { describe, expect, test } from 'vitest';
import type { LeaseToken } from '../../core/dialect.js';
import { heartbeat } from './leases.js';

const table = { schema: undefined, name: 'events' };
const tokens = (count: number): LeaseToken[] =>
  Array.from({ length: count }, (_, partition) => ({ outbox: 'o', partition, owner: 'node-a', epoch: 1 }));
const statements = (renew: readonly LeaseToken[]) =>
  heartbeat(table, 'o', 'node-a', 30_000, undefined, { renew, checkDue: false, recountEvery: 600_000 })
    .length;

describe('the MySQL heartbeat', () => {
  test('renews any number of idle leases in two statements (an UPDATE and a read)', () => {
    const alone = statements([]);
    expect(statements(tokens(1))).toBe(alone + 2);
    expect(statements(tokens(64))).toBe(alone + 2);
  });

  test('reports renewed and lost in partition order, from the partitions the read returns', () => {
    const renew = [5, 0, 2].map((partition) => ({ outbox: 'o', partition, owner: 'node-a', epoch: 1 }));
    const beat = heartbeat(table, 'o', 'node-a', 30_000, undefined, {
      renew,
      checkDue: false,
      recountEvery: 1,
    });
    const nodeRow = [{ live_nodes: 1, leases: null }];
    const result = beat.read([[], [], nodeRow, [], [{ renewed: 5 }, { renewed: 0 }]]);
    expect(result.renewed).toEqual([0, 5]);
    expect(result.lost).toEqual([2]);
  });
});
