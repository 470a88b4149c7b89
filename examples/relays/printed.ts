/**
 * For the tests of the examples in this folder (not an example itself: the docs embed the others).
 * Each example's `main()` prints what its consumer received; its test compares those lines.
 */
import { vi } from 'vitest';

/** Runs `main` and returns the lines it printed with `console.log` (which prints nothing meanwhile). */
export async function printedBy(main: () => Promise<void>): Promise<string[]> {
  const lines: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((line: unknown) => void lines.push(String(line)));
  try {
    await main();
  } finally {
    log.mockRestore();
  }
  return lines;
}
