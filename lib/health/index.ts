// `nestjs-mongo-lock/health`: needs `@nestjs/terminus` (v11+), which the main entry never loads.
export {
  HEALTH_PROBE_KEY,
  MongoLockHealthIndicator,
  type LockChangeStreamState,
  type MongoLockHealthOptions,
} from './mongo-lock-health.indicator';
