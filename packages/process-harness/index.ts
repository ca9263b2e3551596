export { sharedClockMs, installClockSkew } from './clock';
export { ChildCallError, IpcChild, serveIpc, type ForkOptions, type OpMap } from './ipc';
export { TS_CHILD_FLAGS } from './ts-child';
