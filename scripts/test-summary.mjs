// Prints vitest's JSON report as the plain closing line CI reads: "N passed, N failed, N skipped".
import { readFileSync } from 'node:fs';

const file = process.argv[2] ?? '.tmp/vitest.json';
try {
  const report = JSON.parse(readFileSync(file, 'utf8'));
  console.log(`${report.numPassedTests} passed, ${report.numFailedTests} failed, ${report.numPendingTests + report.numTodoTests} skipped`);
} catch (error) {
  console.log(`0 passed, 1 failed (no test report at ${file}: ${error.message})`);
  process.exitCode = 1;
}
