export * from './mongo-lock.error';
export * from './lock-not-acquired.error';
export * from './lock-lost.error';
export * from './lock-store-unavailable.error';
export * from './lock-service-closed.error';
export * from './invalid-lock-key.error';
export * from './invalid-lock-options.error';
