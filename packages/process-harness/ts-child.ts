import * as path from 'node:path';

/** Node flags for a child process that runs the project's TypeScript (see cached-ts-register.js). */
export const TS_CHILD_FLAGS = ['-r', path.join(__dirname, 'cached-ts-register.js')];
