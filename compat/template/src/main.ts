import { runChecks } from './checks.js';
import { runPeerChecks } from './peers.js';
import { createApp, platform } from './platform.js';
import { runTestingChecks } from './testing-checks.js';

async function main(): Promise<void> {
  const app = await createApp();
  await app.listen(0, '127.0.0.1');
  const url = await app.getUrl();
  console.log(`listening on ${url} (${platform})`);
  try {
    await runChecks(app, url);
    // src/peers.ts is compat/template/peers/with.ts or without.ts, by the app's optional peers.
    await runPeerChecks(app, url);
  } finally {
    await app.close();
  }
  // nestjs-mongo-lock/testing, in a context of its own (closed before this resolves).
  await runTestingChecks();
}

// No process.exit(): the job also checks that the app (and the testing context) end by
// themselves once closed.
main().then(
  () => console.log('all checks passed'),
  (error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  },
);
