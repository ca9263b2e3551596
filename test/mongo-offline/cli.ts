import { startOfflineMongo } from './index';

/** `npm run mongo:offline -- --port 27017 [--standalone] [--ttl-monitor-sleep-secs N]` */
function parseArguments(argv: string[]): {
  port: number;
  replicaSet: boolean;
  ttlMonitorSleepSecs?: number;
  host?: string;
} {
  const options: {
    port: number;
    replicaSet: boolean;
    ttlMonitorSleepSecs?: number;
    host?: string;
  } = { port: 27017, replicaSet: true };
  for (let i = 0; i < argv.length; i++) {
    const argument = argv[i];
    if (argument === '--port') options.port = Number(argv[++i]);
    else if (argument === '--standalone') options.replicaSet = false;
    else if (argument === '--ttl-monitor-sleep-secs')
      options.ttlMonitorSleepSecs = Number(argv[++i]);
    else if (argument === '--host') options.host = argv[++i];
    else throw new Error(`unknown argument ${argument}`);
  }
  if (!Number.isInteger(options.port) || options.port < 0) throw new Error('--port needs a number');
  return options;
}

async function main(): Promise<void> {
  const mongo = await startOfflineMongo(parseArguments(process.argv.slice(2)));
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
