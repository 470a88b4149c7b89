/**
 * The outboxes of an instance: those of the `outboxes` option, checked against what the database
 * can do, and the outbox behind each inbox's `process` option (`inbox:<name>`).
 */
import type { DatabaseAdapter } from './database.js';
import type { ResolvedInbox } from './inbox/options.js';
import { invalidOption, resolveOutbox, type InstanceSettings, type ResolvedOutbox } from './options.js';

/** Every outbox's options, resolved and checked against what the database can do. */
export function resolveOutboxes(
  adapter: DatabaseAdapter<unknown, boolean>,
  settings: InstanceSettings,
  raw: unknown,
  hasInboxes: boolean,
): Map<string, ResolvedOutbox> {
  // A consumer with inboxes only may leave the outboxes out.
  if (hasInboxes && raw === undefined) return new Map();
  const empty = typeof raw === 'object' && raw !== null && Object.keys(raw).length === 0;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw) || (empty && !hasInboxes)) {
    throw invalidOption('outboxes', 'an object with at least one outbox, e.g. { orders: { relay } }', raw);
  }
  const relaying = settings.relay || settings.testing === 'manual';
  const resolved = new Map<string, ResolvedOutbox>();
  for (const [name, options] of Object.entries(raw)) {
    const outbox = resolveOutbox(name, options, { relaying, schema: settings.schema });
    if (outbox.notify && !adapter.dialect.capabilities.notifications) {
      throw invalidOption(
        `outboxes.${name}.notify`,
        `false on ${adapter.dialect.name} (it has no notifications)`,
        outbox.notify,
      );
    }
    resolved.set(name, outbox);
  }
  return resolved;
}

/**
 * Adds the outbox behind each inbox's `process` option to `outboxes`; one named like it there
 * (an operator tool's, `relay: false`) would be two configurations of one outbox.
 */
export function addInboxOutboxes(
  adapter: DatabaseAdapter<unknown, boolean>,
  outboxes: Map<string, ResolvedOutbox>,
  inboxes: ReadonlyMap<string, ResolvedInbox>,
): void {
  for (const inbox of inboxes.values()) {
    const outbox = inbox.process?.outbox;
    if (outbox === undefined) continue;
    if (outboxes.has(outbox.name)) {
      throw invalidOption(
        `outboxes.${outbox.name}`,
        `left out: it is the outbox of inboxes.${inbox.name}.process, configured there`,
        outbox.name,
      );
    }
    if (outbox.notify && !adapter.dialect.capabilities.notifications) {
      throw invalidOption(
        `inboxes.${inbox.name}.process.notify`,
        `false on ${adapter.dialect.name} (it has no notifications)`,
        outbox.notify,
      );
    }
    outboxes.set(outbox.name, outbox);
  }
}
