export * from './change-feed';
export * from './key-queue';
export * from './lock-event';
export * from './lock-waiting';
export * from './release-watch';
export * from './wait-logger';
export * from './wait-timing';
export * from './wakeup';
