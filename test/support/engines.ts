/**
 * Whether this Node is one an installed package declares it runs on (its `engines.node`): the tests
 * of a library line that needs a newer Node than the one running them skip, saying why, instead of
 * failing on a runtime the library does not claim to support (CI runs the suite on several Nodes).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { root } from './guides.js';

/** The package.json of a package installed as `name` in node_modules (an npm alias included). */
export function installedPackage(name: string): {
  name: string;
  version: string;
  engines?: { node?: string };
} {
  return JSON.parse(readFileSync(join(root, 'node_modules', name, 'package.json'), 'utf8')) as ReturnType<
    typeof installedPackage
  >;
}

/**
 * Why the package installed as `name` in node_modules (an npm alias included) does not run on this
 * Node, or `undefined` when its `engines.node` range admits it (or it declares none).
 *
 * @example
 * const reason = engineMismatch('@platformatic/kafka'); // '@platformatic/kafka@2.12.1 needs Node …; this is Node 22.16.0'
 */
export function engineMismatch(name: string, node: string = process.versions.node): string | undefined {
  const manifest = installedPackage(name);
  const range = manifest.engines?.node;
  if (range === undefined || satisfies(node, range)) return undefined;
  return `${manifest.name}@${manifest.version} needs Node ${range} (its engines field); this is Node ${node}`;
}

type Version = readonly [number, number, number];

/**
 * `version` within a range of `||` alternatives, each a space-separated list of comparators
 * (`>=`, `>`, `<=`, `<`, `=`, `^`, or a bare version; missing minor and patch count as 0). Throws
 * on any other shape, so that a range this does not understand fails the run instead of skipping it.
 */
export function satisfies(version: string, range: string): boolean {
  const current = parse(version, range);
  return range.split('||').some((alternative) =>
    alternative
      .trim()
      .replace(/(>=|<=|>|<|=|\^)\s+/g, '$1')
      .split(/\s+/)
      .every((comparator) => {
        const [, operator = '=', text = ''] = /^(>=|<=|>|<|=|\^)?(.*)$/.exec(comparator) ?? [];
        const bound = parse(text, range);
        const order = compare(current, bound);
        switch (operator) {
          case '>=':
            return order >= 0;
          case '>':
            return order > 0;
          case '<=':
            return order <= 0;
          case '<':
            return order < 0;
          case '^':
            return order >= 0 && current[0] === bound[0];
          default:
            return order === 0;
        }
      }),
  );
}

function parse(text: string, range: string): Version {
  const match = /^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(text);
  if (match === null) throw new Error(`engines: cannot read the version "${text}" in the range "${range}"`);
  return [Number(match[1]), Number(match[2] ?? 0), Number(match[3] ?? 0)];
}

function compare(a: Version, b: Version): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
}
