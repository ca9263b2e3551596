import { Injectable, Logger } from '@nestjs/common';
import { Cron } from '@nestjs/schedule';
import { Locked, LockService } from '../../lib';

/** How often the digest is due; every instance of the app schedules it. */
const DIGEST_CRON = process.env.SAMPLE_DIGEST_CRON ?? '*/10 * * * * *';

/**
 * A scheduled job that must run once per period across every instance of the application:
 * each instance's scheduler fires it, one takes the lock, the others skip. `minHoldMs` keeps
 * the lock for most of the period even though the job takes a moment, so an instance whose
 * clock or timer is a little late cannot run it a second time in the same period.
 */
@Injectable()
export class DigestJob {
  private readonly logger = new Logger('DigestJob');
  private sent = 0;

  @Cron(DIGEST_CRON, { name: 'digest' })
  @Locked('job:digest', { onBusy: 'skip', minHoldMs: 8_000 })
  async send(): Promise<void> {
    this.sent += 1;
    const lock = LockService.current();
    this.logger.log(`Digest #${this.sent} sent by this instance (fence ${lock?.fence})`);
  }
}
