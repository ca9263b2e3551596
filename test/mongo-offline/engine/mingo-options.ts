import type { Document } from 'bson';
import type { Options } from 'mingo/types';

/** MongoDB semantics for mingo: strict mode, no user JavaScript. */
export const MINGO_OPTIONS: Partial<Options> = {
  useStrictMode: true,
  scriptEnabled: false,
};

/** Options for one command: `$$NOW` and `$$CLUSTER_TIME` are fixed for its whole duration. */
export function commandMingoOptions(variables: Document, collation?: Document): Partial<Options> {
  const options: Partial<Options> = { ...MINGO_OPTIONS, variables };
  if (collation && typeof collation.locale === 'string') {
    return { ...options, collation: collation as Options['collation'] };
  }
  return options;
}
