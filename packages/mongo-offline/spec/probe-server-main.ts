// Child process of probe-server-sync.ts: starts the fixture's server, prints its ServerInfo as
// one line of Extended JSON, and stops it.
import { EJSON } from 'bson';
import { startSpecServer } from './spec-server';

async function main() {
  const server = await startSpecServer();
  try {
    process.stdout.write(`${EJSON.stringify(server.ctx.server)}\n`);
  } finally {
    await server.stop();
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
