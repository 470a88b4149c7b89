// Prints vitest's JSON report as the plain closing line CI reads: "N passed, N failed, N skipped".
// With several reports (`node scripts/test-summary.mjs "Node 24=.tmp/a.json" "Node 22=.tmp/b.json"`)
// it prints one labelled line per report, then the totals as the closing line. Each failed test is
// named above its report's line, with the first line of its failure, because CI keeps only the tail.
import { readFileSync } from 'node:fs';

const args = process.argv.slice(2);
const reports = (args.length > 0 ? args : ['.tmp/vitest.json']).map((arg) => {
  const at = arg.indexOf('=');
  return at < 0 ? { label: undefined, file: arg } : { label: arg.slice(0, at), file: arg.slice(at + 1) };
});

const total = { passed: 0, failed: 0, skipped: 0 };
const line = (c) => `${c.passed} passed, ${c.failed} failed, ${c.skipped} skipped`;
for (const { label, file } of reports) {
  const prefix = label ? `${label}: ` : '';
  let counts;
  try {
    const report = JSON.parse(readFileSync(file, 'utf8'));
    for (const failure of failuresOf(report)) console.log(`${prefix}FAILED ${failure}`);
    counts = {
      passed: report.numPassedTests,
      // A file that fails to load has no failed test, only a failed suite: count it as one.
      failed: report.numFailedTests + (report.numFailedTests === 0 && report.numFailedTestSuites > 0 ? 1 : 0),
      skipped: report.numPendingTests + report.numTodoTests,
    };
  } catch (error) {
    console.log(`${prefix}no test report at ${file} (${error.message})`);
    counts = { passed: 0, failed: 1, skipped: 0 };
    process.exitCode = 1;
  }
  if (label) console.log(`${prefix}${line(counts)}`);
  for (const key of Object.keys(total)) total[key] += counts[key];
}
console.log(line(total));

function failuresOf(report) {
  const failures = [];
  for (const file of report.testResults ?? []) {
    const name = file.name?.replace(`${process.cwd()}/`, '') ?? 'unknown file';
    const failed = (file.assertionResults ?? []).filter((test) => test.status === 'failed');
    for (const test of failed) {
      failures.push(`${name} > ${test.fullName}: ${firstLine(test.failureMessages?.[0])}`);
    }
    if (failed.length === 0 && file.status === 'failed') {
      const why = firstLine(file.message) || 'failed outside its tests (a hook or its import); see the log';
      failures.push(`${name}: ${why}`);
    }
  }
  return failures;
}

function firstLine(text) {
  return (text ?? '').trim().split('\n', 1)[0].slice(0, 300);
}
