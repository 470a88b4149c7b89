/**
 * What a failed pg-boss call means. A Postgres data error (SQLSTATE class 22, e.g. a `\u0000`
 * that jsonb refuses, or class 54, a value too large) is about one job: the batch is sent again
 * one job at a time to find it, and it is permanent. Anything else (connection, permissions,
 * missing tables) fails the whole batch, to be retried.
 */
import { DeliveryError, isOutboxerError, OutboxerError, PermanentError } from '../../core/errors.js';

/** A call that did not finish in time or was abandoned: every job of it counts as failed. */
export class PgBossCallAbandoned extends DeliveryError {
  constructor(message: string, cause?: unknown) {
    super(message, { cause });
    this.name = 'PgBossCallAbandoned';
  }
}

/** The SQLSTATE of a Postgres error (node-postgres sets `code` and `severity`), else `undefined`. */
function sqlState(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null || !('severity' in error)) return undefined;
  const { code } = error as { code?: unknown };
  return typeof code === 'string' && code.length === 5 ? code : undefined;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** True for a Postgres error about the data of a job: the same job fails the same way again. */
function isDataError(error: unknown): boolean {
  const state = sqlState(error);
  return state !== undefined && (state.startsWith('22') || state.startsWith('54'));
}

/** True when nothing can be learned per job (connection, timeout, permissions…): the batch is retried as a whole. */
export function failsWholeBatch(error: unknown): boolean {
  return !isDataError(error);
}

/**
 * How to fix a failure that no retry will cure by itself, or `undefined`. A `PgBoss` that is not
 * started (or was stopped) fails its calls with an AssertionError "Database not opened" in
 * pg-boss 12, and with a TypeError (reading `rows` of nothing) in 10 and 11.
 */
export function misconfiguration(error: unknown): string | undefined {
  const state = sqlState(error);
  if (
    (error instanceof TypeError && /\brows\b/.test(error.message)) ||
    (error instanceof Error && /Database not opened/.test(error.message))
  ) {
    return 'The PgBoss instance is not started (or was stopped): await boss.start() before outboxer.start(), and stop it after outboxer.stop().';
  }
  if (error instanceof Error && /^Queue (.+) does not exist$/.test(error.message)) {
    return `${error.message}: create it with boss.createQueue(name) before outboxer sends jobs to it.`;
  }
  if (state === '42P01' || state === '3F000' || state === '42883') {
    return `pg-boss's tables are not there (${messageOf(error)}): start the PgBoss instance with migrate (the default) once, and give it the schema option it was installed with.`;
  }
  if (state === '42501')
    return `Postgres denied pg-boss's statement (${messageOf(error)}): grant the role of the PgBoss connection access to its schema.`;
  if (state === '3D000' || state?.startsWith('28'))
    return `Postgres refused the PgBoss connection (${messageOf(error)}): fix its connection options.`;
  return undefined;
}

/**
 * The error recorded for a message. `jobId` is set when the failed call held that job alone: a
 * data error is then about this job, a {@link PermanentError}.
 */
export function deliveryErrorOf(error: unknown, queues: string, jobId?: string): unknown {
  if (isOutboxerError(error)) return error;
  const fix = misconfiguration(error);
  if (fix !== undefined)
    return new OutboxerError('RELAY_MISCONFIGURED', fix, { cause: error, retryable: true });
  const state = sqlState(error);
  const detail = `${messageOf(error)}${state === undefined ? '' : ` (SQLSTATE ${state})`}`;
  if (jobId !== undefined && isDataError(error)) {
    return new PermanentError(`Postgres refused pg-boss job ${jobId} for queue ${queues}: ${detail}`, {
      cause: error,
    });
  }
  return new DeliveryError(`pg-boss insert into queue ${queues} failed: ${detail}`, { cause: error });
}
