/**
 * The chaos run's settings, read from the environment once (the variables are listed in run.ts),
 * its run directory, the snapshot of the code its children run, and its log.
 */
import { appendFileSync, copyFileSync, cpSync, mkdirSync, symlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { random, type Random } from './random.js';

export interface RunSettings {
  /** The repository's root. */
  root: string;
  seconds: number;
  seed: number;
  /** Messages per second, over all the publishers. */
  rate: number;
  poison: number;
  publisherCount: number;
  /** Writers per publisher. */
  writers: number;
  /** Milliseconds. */
  drainTimeout: number;
  /** CHAOS_KEEP=1: leave the servers and the topic behind. */
  keep: boolean;
  runDir: string;
  /** Where the children's code lives: the snapshot in the run directory, or the root itself. */
  codeRoot: string;
  /** The harness's random source (restart delays), drawn from the seed. */
  rnd: Random;
  /** When the run started. */
  t0: number;
  /** Prints a line with the run's clock and appends it to harness.log. */
  log: (text: string) => void;
}

/** Reads the settings, makes the run directory and the code snapshot. */
export function runSettings(root: string): RunSettings {
  const seconds = Number(process.env.CHAOS_SECONDS ?? 120);
  const seed = Number(process.env.CHAOS_SEED ?? Math.floor(Math.random() * 1_000_000));
  const rate = Number(process.env.CHAOS_RATE ?? 600);
  const poison = Number(process.env.CHAOS_POISON ?? 0.003);
  const publisherCount = Number(process.env.CHAOS_PUBLISHERS ?? 3);
  const writers = Number(process.env.CHAOS_WRITERS ?? 2);
  const drainTimeout = Number(process.env.CHAOS_DRAIN_TIMEOUT ?? 300) * 1000;
  const keep = process.env.CHAOS_KEEP === '1';
  const runDir = resolve(
    process.env.CHAOS_OUT ??
      join(root, '.tmp', 'chaos', `${new Date().toISOString().replace(/[:.]/g, '-')}-seed${seed}`),
  );
  mkdirSync(runDir, { recursive: true });

  // The children run a snapshot of the code taken now: a relay started again half an hour later must
  // run the same engine as the others, whatever happens to the working tree meanwhile.
  const codeRoot = process.env.CHAOS_SNAPSHOT === '0' ? root : join(runDir, 'code');
  if (codeRoot !== root) {
    for (const dir of ['src', 'chaos']) cpSync(join(root, dir), join(codeRoot, dir), { recursive: true });
    for (const file of ['tsconfig.json', 'package.json'])
      copyFileSync(join(root, file), join(codeRoot, file));
    symlinkSync(join(root, 'node_modules'), join(codeRoot, 'node_modules'), 'dir');
  }
  const rnd = random(seed);
  const t0 = Date.now();
  const log = (text: string): void => {
    const line = `[chaos +${((Date.now() - t0) / 1000).toFixed(1)}s] ${text}`;
    console.log(line);
    appendFileSync(join(runDir, 'harness.log'), line + '\n');
  };
  return {
    root,
    seconds,
    seed,
    rate,
    poison,
    publisherCount,
    writers,
    drainTimeout,
    keep,
    runDir,
    codeRoot,
    rnd,
    t0,
    log,
  };
}
