/**
 * `outboxer dashboard`: the web dashboard of `outboxer/dashboard` on its own node:http server, for
 * every outbox recorded in `<table>_config` (or the one of `--outbox`), until Ctrl-C or SIGTERM.
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { silentLogger } from '../core/logger.js';
import type { OutboxOptions } from '../core/options.js';
import { Outboxer } from '../core/outboxer.js';
import { createDashboard, toNodeHandler } from '../dashboard/index.js';
import type { CliSession, OutboxTarget } from './session.js';
import type { CliIo } from './terminal.js';
import { CliError } from './usage-error.js';

/** `partitions` of an outbox nothing records (as the other commands assume). */
const UNKNOWN_PARTITIONS = 1024;

export async function dashboardCommand(session: CliSession, io: CliIo): Promise<void> {
  const { options } = session;
  const targets = options.outbox === undefined ? await session.recordedOutboxes() : [await session.target()];
  if (targets.length === 0) {
    throw new CliError(
      `No outbox is recorded in ${session.tableName}_config yet (a relaying node records its outboxes when it starts): pass --outbox <name>.`,
      2,
    );
  }
  const outboxes: Record<string, OutboxOptions> = {};
  for (const target of targets) outboxes[target.name] = await outboxOptions(session, target);
  const outboxer = new Outboxer({
    database: session.database.adapter,
    relay: false,
    logger: silentLogger,
    ...(options.schema === undefined ? {} : { schema: options.schema }),
    outboxes,
  }) as Outboxer<never, boolean>;
  const dashboard = createDashboard(outboxer, {
    mutations: options.allowMutations,
    ...(options.basePath === undefined ? {} : { basePath: options.basePath }),
  });

  const server = createServer(toNodeHandler(dashboard));
  server.listen(options.port, options.host);
  await Promise.race([
    once(server, 'listening'),
    once(server, 'error').then(([error]) => {
      throw new CliError(`cannot listen on ${options.host}:${options.port}: ${(error as Error).message}`);
    }),
  ]);
  const { port } = server.address() as AddressInfo;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  io.stderr.write(
    `outboxer dashboard on http://${host}:${port}${dashboard.basePath}/ for ${targets.map((t) => t.name).join(', ')} (${options.allowMutations ? 'changes allowed' : 'read-only'}); Ctrl-C stops it.\n`,
  );
  if (!['127.0.0.1', '::1', 'localhost'].includes(options.host)) {
    io.stderr.write(
      'outboxer: the dashboard has no login of its own and listens beyond this machine: put it behind an authenticating proxy.\n',
    );
  }
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}

async function outboxOptions(session: CliSession, target: OutboxTarget): Promise<OutboxOptions> {
  const partitions = target.partitions ?? UNKNOWN_PARTITIONS;
  return {
    table: session.options.table,
    partitions,
    ordering: target.ordering === 'total' && partitions !== 1 ? 'group' : target.ordering,
    onDead: await session.onDead(target),
  };
}
