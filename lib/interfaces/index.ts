export * from './lock-options.interface';
export * from './lock-state.interface';
export * from './mongo-lock-options.interface';
