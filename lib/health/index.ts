/**
 * A Terminus health indicator for the lock service; needs `@nestjs/terminus` (v11+), which the
 * main entry never loads.
 *
 * @module nestjs-mongo-lock/health
 */
export {
  HEALTH_PROBE_KEY,
  MongoLockHealthIndicator,
  type LockChangeStreamState,
  type MongoLockHealthOptions,
} from './mongo-lock-health.indicator';
