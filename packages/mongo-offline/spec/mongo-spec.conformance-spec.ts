// MongoDB's own specification tests (../shared/mongo-spec or MONGO_SPEC_DIR) against the
// fixture's server: one Jest test per spec test, skipped ones titled with their reason.
import { probeServerSync } from './probe-server-sync';
import { collectSpecCases, groupByFile } from './spec-cases';
import { defaultSpecDir, specDirExists } from './spec-files';
import { startSpecServer, type SpecServer } from './spec-server';

const SERVER_START_TIMEOUT_MS = 120_000;
const SPEC_TEST_TIMEOUT_MS = 60_000;

const dir = defaultSpecDir();

if (!specDirExists(dir)) {
  const notFound = `MongoDB specification tests not found at ${dir}; conformance skipped`;
  // Jest does not list the titles of a suite whose tests are all skipped: say it once here too.
  process.stderr.write(`${notFound}\n`);
  test.skip(notFound, () => undefined);
} else {
  const probe = probeServerSync();
  if ('error' in probe) {
    test('starts the server for the MongoDB specification tests', () => {
      throw new Error(probe.error);
    });
  } else {
    let server: SpecServer | undefined;

    beforeAll(async () => {
      server = await startSpecServer();
      if (server.ctx.server.kind !== probe.info.kind) {
        throw new Error(`Probed a ${probe.info.kind} server but got ${server.ctx.server.kind}`);
      }
    }, SERVER_START_TIMEOUT_MS);

    afterAll(async () => {
      await server?.stop();
    });

    for (const [file, cases] of groupByFile(collectSpecCases(dir, probe.info))) {
      describe(file, () => {
        for (const specCase of cases) {
          if (specCase.skipReason) {
            test.skip(`${specCase.description} [skipped: ${specCase.skipReason}]`, () => undefined);
          } else {
            test(
              specCase.description,
              async () => {
                if (!server) throw new Error('The test server did not start');
                await specCase.run(server.ctx);
              },
              SPEC_TEST_TIMEOUT_MS,
            );
          }
        }
      });
    }
  }
}
