// Prints the counts per project, then one closing line `N passed, N failed, N skipped`
// that CI reads.
class SummaryReporter {
  onRunComplete(_contexts, results) {
    const perProject = new Map();
    for (const file of results.testResults) {
      const name = file.displayName?.name ?? 'tests';
      const counts = perProject.get(name) ?? { passed: 0, failed: 0, skipped: 0 };
      counts.passed += file.numPassingTests;
      counts.failed += file.numFailingTests + (file.testExecError ? 1 : 0);
      counts.skipped += file.numPendingTests + file.numTodoTests;
      perProject.set(name, counts);
    }
    const total = { passed: 0, failed: 0, skipped: 0 };
    for (const [name, c] of perProject) {
      process.stdout.write(
        `${name}: ${c.passed} passed, ${c.failed} failed, ${c.skipped} skipped\n`,
      );
      total.passed += c.passed;
      total.failed += c.failed;
      total.skipped += c.skipped;
    }
    process.stdout.write(
      `${total.passed} passed, ${total.failed} failed, ${total.skipped} skipped\n`,
    );
  }
}
module.exports = SummaryReporter;
