import { expect, test } from 'vitest';
import { CheckedNames } from './checked-names.js';

test('each distinct name is checked once; a value that is not a string every time', () => {
  const seen: unknown[] = [];
  const names = new CheckedNames((name) => {
    seen.push(name);
    return typeof name === 'string' && name.includes(' ') ? 'it has a space' : undefined;
  });
  expect(['a', 'a b', 'a', 'a b', 7, 7].map((name) => names.problem(name))).toEqual([
    undefined,
    'it has a space',
    undefined,
    'it has a space',
    undefined,
    undefined,
  ]);
  expect(seen).toEqual(['a', 'a b', 7, 7]);
});
