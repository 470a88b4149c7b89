/**
 * What the adapter examples share: where Postgres is, a schema of their own (dropped at the end,
 * so running an example leaves nothing behind), and a wait for the relay.
 */
export const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** A fresh schema name; the examples set it as the search path of their connections. */
export function exampleSchema(): string {
  return `outboxer_example_${process.pid}_${Date.now().toString(36)}`;
}

/** The connection string with `search_path` set to `schema`. */
export function withSearchPath(url: string, schema: string): string {
  return `${url}${url.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
}

export async function until(check: () => boolean, timeout = 10_000): Promise<void> {
  const deadline = Date.now() + timeout;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`Nothing arrived within ${timeout} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** What every example returns: what the relay received, and the outbox counts at the end. */
export interface ExampleResult {
  delivered: Array<{ type: string | null; groupKey: string | null; payload: unknown }>;
  counts: { pending: number; delivered: number; dead: number };
}
