#!/usr/bin/env node
/**
 * `npx outboxer <command>`: operate outboxer's tables from a shell. See docs/cli.md.
 * @packageDocumentation
 */
import { runCli } from './run.js';

process.exitCode = await runCli(process.argv.slice(2), {
  env: process.env,
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
});
