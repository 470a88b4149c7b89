/**
 * The logger outboxer writes to. `console` fits; so do pino and winston. Default: warnings and
 * errors on the console, rate-limited (`consoleLogger`); `false` silences outboxer.
 */
export interface Logger {
  debug(message: string, context?: Record<string, unknown>): void;
  info(message: string, context?: Record<string, unknown>): void;
  warn(message: string, context?: Record<string, unknown>): void;
  error(message: string, context?: Record<string, unknown>): void;
}

const ignore = (): void => {};

export const silentLogger: Logger = Object.freeze({
  debug: ignore,
  info: ignore,
  warn: ignore,
  error: ignore,
});

/** How long the default logger keeps quiet about a message it just printed. */
export const CONSOLE_REPEAT_INTERVAL = 60_000;

/** Distinct messages remembered before those whose quiet spell is over are forgotten. */
const REMEMBERED = 256;

export interface ConsoleLoggerOptions {
  /** Milliseconds during which the same message is printed once. Default 60000. */
  readonly interval?: number;
  /** The clock. Default `Date.now`. */
  readonly now?: () => number;
  /** Where lines go. Default the global `console`, looked up at each call (spies see them). */
  readonly console?: Pick<Console, 'warn' | 'error'>;
}

interface Spell {
  /** Until when the message is not printed again. */
  until: number;
  /** Calls not printed since it last was. */
  suppressed: number;
}

/**
 * The logger used when the `logger` option is left out: `warn` and `error` go to `console.warn` and
 * `console.error` with their context object; `debug` and `info` are dropped. A failure that
 * repeats (a relay round failing at every poll while the database is down, every message of a
 * batch going dead) prints once per `interval` for each outbox and partition: the same message
 * (numbers in it aside) arriving again within it is counted, not printed, and the next line
 * printed says how many were left out. A logger passed by the user gets every call.
 */
export function consoleLogger(options: ConsoleLoggerOptions = {}): Logger {
  const interval = options.interval ?? CONSOLE_REPEAT_INTERVAL;
  const now = options.now ?? Date.now;
  const spells = new Map<string, Spell>();

  const write = (level: 'warn' | 'error', message: string, context?: Record<string, unknown>): void => {
    const at = now();
    const key = `${level}\0${message.replace(/\d+/g, '#')}\0${String(context?.outbox)}\0${String(context?.partition)}`;
    const spell = spells.get(key);
    if (spell !== undefined && at < spell.until) {
      spell.suppressed += 1;
      return;
    }
    if (spell === undefined && spells.size >= REMEMBERED) forgetOver(spells, at);
    spells.set(key, { until: at + interval, suppressed: 0 });
    const prefixed = message.startsWith('outboxer:') ? message : `outboxer: ${message}`;
    const line =
      spell !== undefined && spell.suppressed > 0
        ? `${prefixed} (${spell.suppressed} more like this since the last one printed)`
        : prefixed;
    const target = options.console ?? console;
    if (context === undefined) target[level](line);
    else target[level](line, context);
  };

  return Object.freeze({
    debug: ignore,
    info: ignore,
    warn: (message: string, context?: Record<string, unknown>) => write('warn', message, context),
    error: (message: string, context?: Record<string, unknown>) => write('error', message, context),
  });
}

/** Drops the messages whose quiet spell is over; their suppressed counts go unreported. */
function forgetOver(spells: Map<string, Spell>, at: number): void {
  for (const [key, spell] of spells) if (spell.until <= at) spells.delete(key);
}
