/**
 * Which majors of @platformatic/kafka the Kafka relay's tests run on each Node that CI uses: both
 * where the Node is new enough for 2.x, only 1.x on the oldest Node outboxer supports (the 2.x tests
 * are then skipped, naming the engines range they need). Also the peer range: exactly the majors the
 * tests install. No broker needed.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { engineMismatch, installedPackage, satisfies } from '../support/engines.js';
import { root } from '../support/guides.js';

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  engines: { node: string };
  peerDependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
const ci = Object.fromEntries(
  [...readFileSync(join(root, 'scripts/node/versions.sh'), 'utf8').matchAll(/^NODE_(\d+)=(\S+)$/gm)].map(
    ([, major, version]) => [major!, version!],
  ),
);
const oldest = /^>=(\d+\.\d+)$/.exec(pkg.engines.node)?.[1];

test('the installed lines: 2.x as @platformatic/kafka, 1.x as the alias platformatic-kafka-v1', () => {
  expect(installedPackage('@platformatic/kafka')).toMatchObject({ name: '@platformatic/kafka' });
  expect(installedPackage('@platformatic/kafka').version).toMatch(/^2\./);
  expect(installedPackage('platformatic-kafka-v1')).toMatchObject({ name: '@platformatic/kafka' });
  expect(installedPackage('platformatic-kafka-v1').version).toMatch(/^1\./);
  expect(pkg.devDependencies['platformatic-kafka-v1']).toBe(
    `npm:@platformatic/kafka@${installedPackage('platformatic-kafka-v1').version}`,
  );
});

test('the peer range is the tested versions and their majors, no more', () => {
  const range = pkg.peerDependencies['@platformatic/kafka']!;
  const previous = installedPackage('platformatic-kafka-v1').version;
  const current = installedPackage('@platformatic/kafka').version;
  expect(range).toBe(`^${previous} || ^${current}`);
  for (const version of [previous, current]) expect(satisfies(version, range), version).toBe(true);
  expect(satisfies('3.0.0', range)).toBe(false);
});

test.each([
  ['Node 24 of CI', ci['24']!, true],
  ['Node 22 of CI', ci['22']!, true],
  ['the oldest Node of engines', `${oldest}.0`, false],
])('on %s (%s): 1.x runs; 2.x runs: %s', (_what, node, runs2) => {
  expect(engineMismatch('platformatic-kafka-v1', node)).toBeUndefined();
  const mismatch = engineMismatch('@platformatic/kafka', node);
  if (runs2) expect(mismatch).toBeUndefined();
  else
    expect(mismatch).toMatch(
      new RegExp(`^@platformatic/kafka@2\\.\\S+ needs Node .*; this is Node ${node}$`),
    );
});

test('engine ranges are read as npm reads them, and an unreadable one fails loudly', () => {
  const range = '>= 22.22.0 || >= 24.6.0';
  expect(['22.21.9', '22.16.0', '20.19.4'].map((v) => satisfies(v, range))).toEqual([false, false, false]);
  expect(['22.22.0', '23.1.0', '24.6.0'].map((v) => satisfies(v, range))).toEqual([true, true, true]);
  expect(satisfies('24.5.0', '>=20 <24 || >=24.6')).toBe(false);
  expect(satisfies('1.34.9', '^1.35.0')).toBe(false);
  expect(() => satisfies('22.16.0', '22.x')).toThrow(/cannot read the version "22\.x"/);
});
