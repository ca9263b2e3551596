// src/peers.ts of the apps installed without the optional peers (`@opentelemetry/api`,
// `@nestjs/terminus`): their tsc (`skipLibCheck: false`) proves the main entry's declarations
// never name them, and their run that the main entry never loads them. The apps sit outside the
// repository, so nothing else can supply the peers; runPeerChecks makes sure of it.
import type { INestApplication } from '@nestjs/common';
import { Module } from '@nestjs/common';

/** Nothing to add to the app without the peers. */
@Module({})
export class PeersModule {}

const OPTIONAL_PEERS = ['@opentelemetry/api', '@nestjs/terminus'];

/** `ok` once each optional peer is shown absent: an import of it fails as not found. */
export async function runPeerChecks(_app: INestApplication, _baseUrl: string): Promise<void> {
  for (const name of OPTIONAL_PEERS) {
    const specifier: string = name; // not a literal: tsc must not look for it
    const outcome = await import(specifier).then(
      () => 'found',
      (error: unknown) => (error as { code?: unknown }).code,
    );
    if (outcome !== 'MODULE_NOT_FOUND' && outcome !== 'ERR_MODULE_NOT_FOUND') {
      throw new Error(`optional peer ${name}: expected it absent, got ${String(outcome)}`);
    }
  }
  console.log(`ok - without the optional peers: ${OPTIONAL_PEERS.join(' and ')} not installed`);
}
