import { startOfflineMongo } from './index';

import { once } from 'node:events';
import { createInterface } from 'node:readline';

/**
 * `npm run mongo:offline -- --port 27017 [--standalone] [--ttl-monitor-sleep-secs N]
 * [--listen-on-stdin]`. With `--listen-on-stdin` it prints `ready` once loaded and listens only
 * when a line arrives on stdin: a test can load a replacement server ahead of time and start
 * it the moment the port is free (a restart takes a mongod about as long).
 */
function parseArguments(argv: string[]): {
  port: number;
  replicaSet: boolean;
  ttlMonitorSleepSecs?: number;
  host?: string;
  listenOnStdin?: boolean;
} {
  const options: {
    port: number;
    replicaSet: boolean;
    ttlMonitorSleepSecs?: number;
    host?: string;
    listenOnStdin?: boolean;
  } = { port: 27017, replicaSet: true };
  for (let i = 0; i < argv.length; i++) {
    const argument = argv[i];
    if (argument === '--port') options.port = Number(argv[++i]);
    else if (argument === '--standalone') options.replicaSet = false;
    else if (argument === '--ttl-monitor-sleep-secs')
      options.ttlMonitorSleepSecs = Number(argv[++i]);
    else if (argument === '--host') options.host = argv[++i];
    else if (argument === '--listen-on-stdin') options.listenOnStdin = true;
    else throw new Error(`unknown argument ${argument}`);
  }
  if (!Number.isInteger(options.port) || options.port < 0) throw new Error('--port needs a number');
  return options;
}

async function main(): Promise<void> {
  const options = parseArguments(process.argv.slice(2));
  if (options.listenOnStdin) {
    process.stdout.write('ready\n');
    const lines = createInterface({ input: process.stdin });
    await once(lines, 'line');
    lines.close();
  }
  const mongo = await startOfflineMongo(options);
  process.stdout.write(`${mongo.uri}\n`);
  process.stderr.write('offline MongoDB test server (not MongoDB); stop with Ctrl-C\n');
  const shutdown = (): void => {
    void mongo.stop().then(() => process.exit(0));
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
