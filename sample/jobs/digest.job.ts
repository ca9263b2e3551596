import { Injectable, Logger } from '@nestjs/common';
import { Cron } from '@nestjs/schedule';
import { LockService, OnlyLeader } from '../../lib';

/** How often the digest is due; every instance of the app schedules it. */
const DIGEST_CRON = process.env.SAMPLE_DIGEST_CRON ?? '*/10 * * * * *';

/**
 * A scheduled job that only the leader runs: every instance's scheduler fires it, and
 * `@OnlyLeader` lets it run on the one instance that leads `digest` (the others skip, logged at
 * debug level). When the leader stops, another instance takes over at once; if it dies, within
 * the 10 s lease. The term's fence goes with the digest's writes, its signal stops them.
 */
@Injectable()
export class DigestJob {
  private readonly logger = new Logger('DigestJob');
  private sent = 0;

  @Cron(DIGEST_CRON, { name: 'digest' })
  @OnlyLeader('digest', { ttlMs: 10_000 })
  async send(): Promise<void> {
    const term = LockService.currentTerm();
    if (!term) return;
    this.sent += 1;
    this.logger.log(`Digest #${this.sent} sent by the leader (term fence ${term.fence})`);
  }
}
