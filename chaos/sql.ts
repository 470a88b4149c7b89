/** SQL text helpers of the chaos run, written once for Postgres and MySQL (`?` placeholders). */

/** `text` with its `?` numbered `$1`, `$2`… for Postgres (the harness's SQL has no other `?`). */
export function numbered(text: string): string {
  let n = 0;
  return text.replace(/\?/g, () => `$${(n += 1)}`);
}

/** `?, ?, ?`: `n` placeholders, for an IN list. */
export function placeholders(n: number): string {
  return Array.from({ length: n }, () => '?').join(', ');
}

/** `(?, ?), (?, ?)`: `rows` rows of `columns` placeholders, for a multi-row VALUES. */
export function valueRows(rows: number, columns: number): string {
  return Array.from({ length: rows }, () => `(${placeholders(columns)})`).join(', ');
}

/** Gives up on `work` after `ms`, calling `abandon` (which closes its connection). */
export async function withTimeout<T>(work: Promise<T>, ms: number, abandon: () => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          abandon();
          reject(new Error(`query timed out after ${ms} ms`));
        }, ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
