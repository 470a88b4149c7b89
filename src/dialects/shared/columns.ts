/** Column readers shared by the dialects. */

export function parseJsonColumn(value: unknown): unknown {
  return typeof value === 'string' ? JSON.parse(value) : value;
}

export function parseHeaders(value: unknown): Record<string, string> {
  if (value === null || value === undefined) return {};
  return parseJsonColumn(value) as Record<string, string>;
}
