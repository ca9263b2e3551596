import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as ts from 'typescript';

// Type-checks README examples against the library's sources, as an app would compile them.

const root = join(__dirname, '../..');
const readme = readFileSync(join(root, 'README.md'), 'utf8');

/** The ```ts block of the README that contains `marker` (indented blocks in lists too). */
function tsBlock(marker: string): string {
  const blocks = [...readme.matchAll(/^( *)```ts\n([\s\S]*?)^\1```$/gm)].map(([, indent, body]) =>
    body
      .split('\n')
      .map((line) => line.slice(indent.length))
      .join('\n'),
  );
  const found = blocks.filter((block) => block.includes(marker));
  expect(found).toHaveLength(1);
  return found[0];
}

const options = (() => {
  const { config } = ts.readConfigFile(join(root, 'tsconfig.json'), ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(config, ts.sys, root);
  return { ...parsed.options, noEmit: true, noUnusedLocals: false };
})();

/** The type errors of `source` compiled as a module of this repository's `test/readme`. */
function typeErrors(source: string): string[] {
  const file = join(root, 'test/readme/__readme_example__.ts');
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, language, ...rest) =>
    name === file
      ? ts.createSourceFile(name, source, language)
      : getSourceFile(name, language, ...rest);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => name === file || fileExists(name);
  const program = ts.createProgram([file], options, host);
  const sourceFile = program.getSourceFile(file)!;
  return [
    ...program.getSyntacticDiagnostics(sourceFile),
    ...program.getSemanticDiagnostics(sourceFile),
  ].map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
}

const imports = `
import type { ClientSession, Collection, MongoClient } from 'mongodb';
import { from, finalize, switchMap } from 'rxjs';
import { LockService, MongoLockModule } from '../../lib';
export {};
`;

jest.setTimeout(60_000);

describe('README examples compile', () => {
  it('the LockService tour, await using included', () => {
    const source = `${imports}
declare const locks: LockService;
declare const id: string;
declare const sessionId: string;
declare function closeInvoice(id: string, fence: bigint, signal: AbortSignal): Promise<void>;
declare function transfer(signal: AbortSignal): Promise<void>;
declare function runJob(signal: AbortSignal): Promise<void>;
export async function example() {
${tsBlock('await using held')}
}`;
    expect(typeErrors(source)).toEqual([]);
  });

  it('the transaction example, and the module given the client the data uses', () => {
    const source = `${imports}
declare const client: MongoClient;
declare const id: string;
declare const amount: number;
declare const accounts: Collection<{ _id: string; balance: number }>;
declare const ledger: Collection<{ account: string; amount: number }>;
declare const MONGO_CLIENT: symbol;
export async function example() {
${tsBlock('{ transaction: { maxCommitTimeMS: 5_000 } }')}
${tsBlock('inject: [MONGO_CLIENT]')}
}`;
    expect(typeErrors(source)).toEqual([]);
  });

  it('does not point to lock.session.client, which the driver typings hide', () => {
    expect(readme).not.toMatch(/session\.client/);
    // Why: ClientSession's client is excluded from the mongodb package's public typings.
    const errors = typeErrors(`${imports}
declare const session: ClientSession;
const client: MongoClient = session.client;`);
    expect(errors.join('\n')).toMatch(/Property 'client' does not exist on type 'ClientSession'/);
  });

  it('says that await using needs TypeScript 5.2', () => {
    expect(readme).toMatch(/`await using` example below needs 5\.2/);
  });
});
