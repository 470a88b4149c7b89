import type { DatabaseAdapter, Dialect, ListenHandlers } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { invalidOption } from '../../core/options.js';

/**
 * The engine's side of an adapter: what runs outside the user's transactions (migrations, the
 * workers of a relaying node, the admin API), on the library's own connection or `relayDatabase`.
 */
export type EngineSide = Pick<DatabaseAdapter, 'execute' | 'executeAtomically' | 'listen'>;

/** Options every data-layer adapter accepts. */
export interface DataLayerOptions {
  /**
   * Runs the relay side (`migrate()`, polling, settling, the admin API and, unless `notifications`
   * says otherwise, LISTEN) on another adapter of the same database, such as `nodePostgres(pool)`
   * from `outboxer/pg`. Publishing still runs in your transactions. Default: the library's own
   * connection.
   *
   * @example
   * knex(db, { relayDatabase: nodePostgres(new pg.Pool({ connectionString })) })
   */
  relayDatabase?: DatabaseAdapter<never, boolean>;
  /**
   * Where relays LISTEN for the wake-ups of outboxes with `notify: true`: any adapter with a
   * `listen`, such as `nodePostgres(pool)` (it opens one dedicated connection outside the pool).
   * Default: the LISTEN of `relayDatabase` if given, else the library's own where it has one
   * (postgres.js, Drizzle); without one, relays find new messages by polling (`pollInterval`).
   *
   * @example
   * prisma(client, { notifications: nodePostgres(pool) })
   */
  notifications?: Pick<DatabaseAdapter<never, boolean>, 'listen'>;
}

const OPTION_KEYS = new Set(['relayDatabase', 'notifications']);

/**
 * Checks the options of an adapter factory, rejecting unknown keys, and returns the relay side:
 * the library's own unless `relayDatabase` replaces it, with LISTEN from `notifications` first.
 */
export function resolveRelaySide(
  factory: string,
  dialect: Dialect,
  own: EngineSide,
  options: DataLayerOptions | undefined,
  extraKeys: readonly string[] = [],
): EngineSide {
  if (options === undefined) options = {};
  if (typeof options !== 'object' || options === null)
    throw invalidOption(factory, 'an options object', options);
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.has(key) && !extraKeys.includes(key)) {
      throw invalidOption(
        `${factory}.${key}`,
        `one of ${[...OPTION_KEYS, ...extraKeys].join(', ')} (unknown option)`,
        (options as Record<string, unknown>)[key],
      );
    }
  }
  const { relayDatabase, notifications } = options;
  if (relayDatabase !== undefined) {
    if (
      typeof relayDatabase !== 'object' ||
      relayDatabase === null ||
      typeof relayDatabase.execute !== 'function' ||
      typeof relayDatabase.dialect?.name !== 'string'
    ) {
      throw invalidOption(
        `${factory}.relayDatabase`,
        'a database adapter such as nodePostgres(pool)',
        relayDatabase,
      );
    }
    if (relayDatabase.dialect.name !== dialect.name) {
      throw new OutboxerError(
        'INVALID_OPTIONS',
        `Option "${factory}.relayDatabase" must be an adapter of the same database (${dialect.name}); got a ${relayDatabase.dialect.name} adapter.`,
      );
    }
  }
  if (
    notifications !== undefined &&
    (typeof notifications !== 'object' ||
      notifications === null ||
      typeof notifications.listen !== 'function')
  ) {
    throw invalidOption(
      `${factory}.notifications`,
      'an adapter with listen(), such as nodePostgres(pool)',
      notifications,
    );
  }
  const base: EngineSide = relayDatabase ?? own;
  const listener = notifications ?? base;
  return {
    execute: (query) => base.execute(query),
    executeAtomically: (queries) => base.executeAtomically(queries),
    ...(listener.listen === undefined
      ? {}
      : { listen: (channel: string, handlers: ListenHandlers) => listener.listen!(channel, handlers) }),
  };
}
