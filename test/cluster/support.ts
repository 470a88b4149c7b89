/**
 * What the Postgres cluster tests share (notify, serialize-writes, connections and
 * configuration-agreement.test.ts): one schema per test file, with a pool of 20, and instances on
 * it whose `events` outbox has a table of the test's own. setUpPostgres() registers, in the calling
 * test file, the hooks that create and close the fixture; `fixture` is a live binding.
 */
import { afterAll, beforeAll } from 'vitest';
import { Outboxer, type OutboxOptions } from 'outboxer';
import { postgresFixture } from '../support/databases.js';

export type Fixture = Awaited<ReturnType<typeof postgresFixture>>;

export let fixture: Fixture;

/** The hooks of every cluster test file: one Postgres schema per file. */
export function setUpPostgres(): void {
  beforeAll(async () => {
    fixture = await postgresFixture(20);
  });
  afterAll(() => fixture.close());
}

let tables = 0;
export function instance(table: string, options: OutboxOptions, extra: Record<string, unknown> = {}) {
  return new Outboxer({
    database: fixture.database,
    outboxes: { events: { table, pollInterval: 20, backoff: { min: 10, max: 50 }, ...options } },
    leaseTimeout: 600,
    ...extra,
  } as never) as Outboxer<never, false>;
}
export const newTable = () => `cluster_${++tables}`;
