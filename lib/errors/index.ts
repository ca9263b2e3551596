export * from './mongo-lock.error';
export * from './lock-not-acquired.error';
export * from './lock-lost.error';
export * from './invalid-lock-key.error';
export * from './invalid-lock-options.error';
