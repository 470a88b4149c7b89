/** Output for people: aligned tables, relative times, numbers with separators. */

/** Makes text safe for a terminal: control characters (escape sequences, line breaks) are shown escaped. */
export function printable(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) =>
    c === '\n' ? '\\n' : c === '\t' ? ' ' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** Cuts text to `max` characters, marking the cut with an ellipsis. */
export function shorten(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, Math.max(0, max - 1))}…`;
}

export function count(n: number): string {
  return n.toLocaleString('en-US');
}

/** `3d 4h`, `2h 5m`, `4m 12s`, `12s`, `350ms`: the two largest units. */
export function duration(ms: number): string {
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(abs)}ms`;
  const units: Array<[string, number]> = [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ];
  const parts: string[] = [];
  let rest = abs;
  for (const [unit, size] of units) {
    const value = Math.floor(rest / size);
    if (value > 0 || parts.length > 0) parts.push(`${value}${unit}`);
    rest -= value * size;
    if (parts.length === 2) break;
  }
  return parts.filter((part, i) => i === 0 || !part.startsWith('0')).join(' ');
}

/** `4m 12s ago`, `in 30s`, or `-` for no date. */
export function relative(date: Date | null, now: number): string {
  if (date === null) return '-';
  const diff = date.getTime() - now;
  if (Math.abs(diff) < 1000) return 'now';
  return diff < 0 ? `${duration(-diff)} ago` : `in ${duration(diff)}`;
}

export type Align = 'left' | 'right';

/** An aligned table with a header row; `align` per column (default left). */
export function table(
  headers: readonly string[],
  rows: readonly string[][],
  align: readonly Align[] = [],
): string {
  const cells = [headers, ...rows].map((row) => row.map(printable));
  const widths = headers.map((_, column) => Math.max(...cells.map((row) => (row[column] ?? '').length)));
  const lines = cells.map((row) =>
    row
      .map((cell, column) => {
        const width = widths[column]!;
        return align[column] === 'right' ? cell.padStart(width) : cell.padEnd(width);
      })
      .join('  ')
      .trimEnd(),
  );
  return `${lines.join('\n')}\n`;
}

/** `--json` output: two-space indented, dates as ISO strings, one trailing newline. */
export function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}
