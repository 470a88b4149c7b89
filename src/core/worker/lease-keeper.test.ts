import diagnostics from 'node:diagnostics_channel';
import { afterEach, describe, expect, test, vi } from 'vitest';
import type { DatabaseAdapter } from '../database.js';
import type { Dialect } from '../dialect.js';
import { silentLogger } from '../logger.js';
import { resolveOutbox } from '../options.js';
import type { Relay } from '../relay.js';
import { statement, type SqlQuery } from '../sql.js';
import { channels } from '../telemetry.js';
import type { WorkerDeps } from './deps.js';
import { LeaseKeeper } from './lease-keeper.js';

function keeper(held: () => boolean) {
  const renewals: number[] = [];
  const dialect = {
    renewLease: (_table: unknown, _lease: unknown, ttl: number, now: number) => {
      renewals.push(now);
      return statement({ text: `renew ${ttl}`, values: [] }, () => held());
    },
  } as unknown as Dialect;
  const adapter = {
    dialect,
    sync: false,
    execute: async (_query: SqlQuery) => [],
  } as unknown as DatabaseAdapter<unknown, boolean>;
  const relay: Relay = { deliver: async () => undefined };
  const deps: WorkerDeps = {
    adapter,
    outbox: resolveOutbox('orders', { relay }, { relaying: true, schema: undefined }),
    destination: relay,
    instance: 'test',
    leaseTimeout: 3_000,
    maxErrorLength: 1000,
    logger: silentLogger,
  };
  return {
    keeper: new LeaseKeeper(deps, { outbox: 'orders', partition: 0, owner: 'test', epoch: 1 }),
    renewals,
  };
}

describe('LeaseKeeper', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  test('renews once half of the lease has passed since the last renewal, with the process clock', async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const { keeper: k, renewals } = keeper(() => true);
    vi.setSystemTime(1_001_499);
    expect(await k.renewIfDue()).toBe(true);
    expect(renewals).toEqual([]);
    vi.setSystemTime(1_001_500);
    expect(await k.renewIfDue()).toBe(true);
    expect(renewals).toEqual([1_001_500]);
    vi.setSystemTime(1_002_000);
    k.renewed(); // the coordinator's heartbeat renewed it
    vi.setSystemTime(1_003_499);
    expect(await k.renewIfDue()).toBe(true);
    expect(renewals).toEqual([1_001_500]);
  });

  test('reports a lost lease, and a lease not renewed for a whole period as expired', async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const { keeper: k } = keeper(() => false);
    const lost: unknown[] = [];
    const onLost = (message: unknown) => lost.push(message);
    diagnostics.subscribe(channels.leaseLost.name, onLost);
    try {
      vi.setSystemTime(1_001_500);
      expect(await k.renewIfDue()).toBe(false);
      expect(lost).toEqual([{ instance: 'test', outbox: 'orders', partition: 0, epoch: 1 }]);
      expect(k.expired()).toBe(false);
      vi.setSystemTime(1_003_001);
      expect(k.expired()).toBe(true);
    } finally {
      diagnostics.unsubscribe(channels.leaseLost.name, onLost);
    }
  });
});
