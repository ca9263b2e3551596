// Jest's runner with one worker: the fault suites run their files one after another, each
// alone on the machine, because their bounds are times (a takeover within the lease plus a
// margin) that a test file running beside them would stretch. Jest runs the tests of each
// runner in turn, so the other projects finish, on every worker, before these start.
const TestRunner = require('jest-runner').default;

class OneAtATimeRunner extends TestRunner {
  constructor(globalConfig, context) {
    super({ ...globalConfig, maxWorkers: 1 }, context);
  }
}

module.exports = OneAtATimeRunner;
