import { run, type DatabaseAdapter, type RecordedConfiguration } from './database.js';
import { explainMissingSchema, OutboxerError } from './errors.js';
import type { Logger } from './logger.js';
import type { ResolvedOutbox } from './options.js';

type Adapter = DatabaseAdapter<never, boolean>;

/** Refuses a database server older than the SQL needs (`migrate()` calls it first). */
export async function checkServerVersion(adapter: Adapter): Promise<void> {
  const { dialect } = adapter;
  const version = await run(adapter, dialect.serverVersion());
  if (!(version >= dialect.minimumVersion.number)) {
    throw new OutboxerError(
      'DATABASE_UNSUPPORTED',
      `outboxer needs ${dialect.minimumVersion.name} or newer; this server reports version ${version}.`,
    );
  }
}

/**
 * The configuration the relaying nodes recorded for an outbox, or `undefined` when none did yet.
 * What the workers actually read: `counts()` finds orphans with its `partitions`, as the CLI does.
 * The first statement of `start()`, `counts()`, `retryDead()` and `discard()`: tables `migrate()`
 * has not created are reported here as `SCHEMA_MISSING`.
 */
export async function readRecordedConfiguration(
  adapter: Adapter,
  outbox: Pick<ResolvedOutbox, 'table' | 'name'>,
): Promise<RecordedConfiguration | undefined> {
  return run(adapter, adapter.dialect.readConfiguration(outbox.table, outbox.name)).catch(
    (error: unknown) => {
      throw explainMissingSchema(adapter.dialect, outbox.table, error);
    },
  );
}

/**
 * Checks this node's configuration of every outbox against the one recorded in the database
 * (and records it the first time): nodes that disagree on partitions, ordering or
 * serializeWrites write and read different partitions, and break the order.
 *
 * Nothing recorded yet: the configuration is inserted only if still absent, then read back and
 * compared like any recorded one. Reading, then upserting, let two nodes with different settings
 * that started together on a fresh table both find no row, both write, and both start. On Postgres
 * the second insert waits for the first one's commit and then does nothing.
 */
export async function checkConfigurations(
  adapter: Adapter,
  outboxes: readonly ResolvedOutbox[],
  logger: Logger,
): Promise<void> {
  const { dialect } = adapter;
  for (const outbox of outboxes) {
    const wanted: RecordedConfiguration = {
      partitions: outbox.partitions,
      ordering: outbox.ordering,
      serializeWrites: outbox.serializeWrites,
      onDead: outbox.onDead,
    };
    let recorded = await readRecordedConfiguration(adapter, outbox);
    if (recorded === undefined) {
      await run(adapter, dialect.writeConfiguration(outbox.table, outbox.name, wanted, Date.now(), true));
      // Ours, or the one a node starting at the same time recorded first. (Gone again only if
      // someone deleted the row in between: then nothing disagrees with ours.)
      recorded = (await readRecordedConfiguration(adapter, outbox)) ?? wanted;
    }
    const differences = describeDifferences(recorded, wanted);
    if (differences.length === 0) continue;
    await allowReconfiguration(adapter, outbox, differences, recorded.partitions);
    logger.warn('outboxer: recording a new outbox configuration', {
      outbox: outbox.name,
      changes: differences.join('; '),
    });
    await run(adapter, dialect.writeConfiguration(outbox.table, outbox.name, wanted, Date.now()));
  }
}

async function allowReconfiguration(
  adapter: Adapter,
  outbox: ResolvedOutbox,
  differences: string[],
  recordedPartitions: number,
): Promise<void> {
  const what = differences.join('; ');
  if (outbox.reconfigure === false) {
    throw new OutboxerError(
      'CONFIGURATION_MISMATCH',
      `Outbox "${outbox.name}" is configured differently from the configuration recorded in the database: ${what}. Every node must agree, or messages are written to partitions no worker reads and groups are reordered. Deploy the same configuration everywhere; to change it on purpose, let the outbox drain (counts().pending = 0) and start one node with outboxes.${outbox.name}.reconfigure: true.`,
    );
  }
  if (outbox.partitions === recordedPartitions || outbox.reconfigure === 'force') return;
  const { pending } = await run(
    adapter,
    adapter.dialect.counts(outbox.table, outbox.name, outbox.partitions),
  );
  if (pending > 0) {
    throw new OutboxerError(
      'CONFIGURATION_MISMATCH',
      `Outbox "${outbox.name}" would change partitions (${what}) while ${pending} messages are pending: their groups could be reordered or orphaned. Let it drain first, or set outboxes.${outbox.name}.reconfigure: 'force' to accept that.`,
    );
  }
}

/**
 * For instances that do not relay (publish-only, admin, CLI): `retryDead` and `discard` must treat
 * dead messages as the relaying nodes do (parked or not), so they refuse when this instance's
 * `onDead` disagrees with the recorded one. Nothing recorded yet: nothing to disagree with.
 */
export async function checkRecordedOnDead(adapter: Adapter, outbox: ResolvedOutbox): Promise<void> {
  const recorded = (await readRecordedConfiguration(adapter, outbox))?.onDead;
  if (recorded === undefined || recorded === outbox.onDead) return;
  throw new OutboxerError(
    'CONFIGURATION_MISMATCH',
    `Outbox "${outbox.name}" has onDead ${JSON.stringify(outbox.onDead)} here but ${JSON.stringify(recorded)} on the relaying nodes: reviving or discarding dead messages with the wrong mode would release or strand parked groups. Configure outboxes.${outbox.name}.onDead the same everywhere.`,
  );
}

function describeDifferences(recorded: RecordedConfiguration, wanted: RecordedConfiguration): string[] {
  return (Object.keys(wanted) as Array<keyof RecordedConfiguration>)
    .filter((key) => recorded[key] !== wanted[key])
    .map(
      (key) =>
        `${key} is ${JSON.stringify(wanted[key])} here but ${JSON.stringify(recorded[key])} in the database`,
    );
}
