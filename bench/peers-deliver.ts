/**
 * The peers' delivery rows (part of the `peers` group): a backlog delivered by one consumer in
 * batches of 100, outboxer's relay against pg-boss and pg-transactional-outbox; then in order per
 * key with 4 workers, outboxer's group-ordered relay against pg-boss's key_strict_fifo queue.
 * outboxer's figures are the relay rows of the same run where they ran.
 */
import { addPeerRow, type BenchContext } from './context.js';
import { GROUPS, judgePeers, type Peer } from './peer.js';
import { pgBossOrderedDelivery } from './pg-boss-peer.js';
import type { PostgresBench } from './postgres.js';
import type { Figure } from './report.js';
import { relayOurs } from './relay.js';
import { rows } from './support.js';

export async function deliverRows(ctx: BenchContext<PostgresBench>, all: readonly Peer[]): Promise<void> {
  const { settings } = ctx;
  // Deliver: the same backlog, one consumer, batches of 100, a handler that only counts.
  const count = rows(settings, 100_000, 3_000);
  const capMs = settings.quick ? 5_000 : 30_000;
  const ours =
    ctx.figures.get('relay.p1b100') ??
    (await relayOurs(ctx, { partitions: 1, batchSize: 100, keep: false }, count)).rate;
  const peers: Array<{ name: string; figure?: Figure; note?: string }> = [];
  for (const peer of all) {
    if (peer.name === 'outboxer') continue;
    if (peer.relay === undefined) {
      peers.push({ name: peer.name, note: peer.unavailable });
      continue;
    }
    try {
      const result = await peer.relay(count, capMs);
      peers.push({ name: peer.name, figure: result.figure, note: result.note });
    } catch (error) {
      peers.push({ name: peer.name, note: `failed: ${String(error).slice(0, 160)}` });
    }
  }
  const oursFigure: Figure = { value: ours, unit: 'msg/s' };
  addPeerRow(ctx, {
    what: `Deliver a backlog of ${count.toLocaleString('en-US')} (one consumer, batches of 100)`,
    ours: oursFigure,
    peers,
    target: judgePeers(ctx, ours, peers),
  });
  ctx.log(
    `  Deliver: outboxer ${ours.toFixed(0)}; ${peers.map((p) => `${p.name} ${p.figure?.value.toFixed(0) ?? p.note}`).join('; ')}`,
  );

  // Deliver in order per key with several workers: outboxer's relay (ordering 'group', 4
  // partitions) against pg-boss 12's key_strict_fifo queue with 4 consumers.
  const oursOrdered =
    ctx.figures.get('relay.p4b100') ??
    (await relayOurs(ctx, { partitions: 4, batchSize: 100, keep: false }, count)).rate;
  const ordered: Array<{ name: string; figure?: Figure; note?: string }> = [];
  try {
    const result = await pgBossOrderedDelivery(ctx, { count, groups: GROUPS, consumers: 4, capMs });
    ordered.push({
      name: 'pg-boss',
      figure: result.figure,
      note: ['`key_strict_fifo` queue', result.note].filter(Boolean).join('; '),
    });
  } catch (error) {
    ordered.push({ name: 'pg-boss', note: `failed: ${String(error).slice(0, 160)}` });
  }
  addPeerRow(ctx, {
    what: `Deliver a backlog of ${count.toLocaleString('en-US')} in order per key (${GROUPS.toLocaleString('en-US')} keys, 4 workers, batches of 100)`,
    ours: { value: oursOrdered, unit: 'msg/s' },
    peers: ordered,
    target: judgePeers(ctx, oursOrdered, ordered),
  });
  ctx.log(
    `  Deliver in order per key: outboxer ${oursOrdered.toFixed(0)}; ${ordered.map((p) => `${p.name} ${p.figure?.value.toFixed(0) ?? ''} ${p.note ?? ''}`).join('; ')}`,
  );
}
