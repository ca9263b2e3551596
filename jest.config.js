// One Jest run, several projects: `npm test` runs them all; `--selectProjects` picks one. The
// workspace packages' tests (packages/*) run in the same projects as the library's.
const base = {
  testEnvironment: 'node',
  moduleFileExtensions: ['ts', 'js', 'json'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.jest.json' }],
    '^.+\\.js$': '<rootDir>/test/support/esm-to-cjs.transform.js',
  },
  // Nest 12 and a few of its dependencies ship only ESM; Jest on Node 20 needs them as CommonJS.
  transformIgnorePatterns: [
    '/node_modules/(?!(@nestjs|file-type|strtok3|token-types|uint8array-extras|@tokenizer|@borewit)/)',
  ],
};

// At least two workers: Jest's default (one less than the cores) is one on a 2-core machine,
// where the unit and e2e files, which mostly wait on timers and sockets, run well side by side.
const { availableParallelism } = require('node:os');

module.exports = {
  maxWorkers: Math.max(2, availableParallelism() - 1),
  reporters: ['default', '<rootDir>/test/support/summary-reporter.js'],
  projects: [
    {
      ...base,
      displayName: 'unit',
      testMatch: [
        '<rootDir>/lib/**/*.spec.ts',
        '<rootDir>/test/**/*.spec.ts',
        '<rootDir>/packages/*/**/*.spec.ts',
      ],
    },
    {
      ...base,
      displayName: 'e2e',
      testMatch: ['<rootDir>/test/**/*.e2e-spec.ts', '<rootDir>/packages/*/**/*.e2e-spec.ts'],
    },
    {
      ...base,
      displayName: 'conformance',
      testMatch: ['<rootDir>/packages/mongo-offline/spec/**/*.conformance-spec.ts'],
    },
    {
      ...base,
      displayName: 'faults',
      testMatch: ['<rootDir>/test/faults/**/*.fault-spec.ts'],
      runner: '<rootDir>/test/support/one-at-a-time-runner.js',
    },
  ],
};
