import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import * as ts from 'typescript';
import {
  compile,
  currentCompiler,
  declarationErrors,
  type DocCompiler,
  emitDeclarations,
  lowestCompiler,
  root,
} from './doc-compilers';

// Type-checks every ```ts block of README.md and docs/*.md twice, as an app would compile them:
// with the project's TypeScript against the library's sources, and with TypeScript 5.1 (the
// README's lowest) against the declaration files `npm run build` emits, except the blocks that
// say they need 5.2. Also checks that the documents' relative links resolve.

/** README.md, then the guides, as paths relative to the repository. */
const documents = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`),
];
const text = new Map(documents.map((path) => [path, readFileSync(join(root, path), 'utf8')]));

interface Block {
  /** `README.md:42`: the document and the line of the opening fence. */
  name: string;
  document: string;
  /** Line of the block's first line of code in the document, 1-based. */
  firstLine: number;
  language: string;
  source: string;
}

/** Every fenced block of a document; indented blocks (in lists) lose their indentation. */
function fencedBlocks(document: string): Block[] {
  const lines = text.get(document)!.split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^( *)```(\S*)\s*$/.exec(lines[i]);
    if (!open) continue;
    const [, indent, language] = open;
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && !new RegExp(`^ {0,${indent.length}}\`\`\`\\s*$`).test(lines[j])) {
      body.push(lines[j].startsWith(indent) ? lines[j].slice(indent.length) : lines[j].trimStart());
      j++;
    }
    if (j === lines.length) throw new Error(`${document}:${i + 1}: a code block is never closed`);
    blocks.push({
      name: `${document}:${i + 1}`,
      document,
      firstLine: i + 2,
      language,
      source: body.join('\n'),
    });
    i = j;
  }
  return blocks;
}

const allBlocks = documents.flatMap(fencedBlocks);
const tsBlocks = allBlocks.filter((block) => block.language === 'ts');

// What the examples take for granted: an injected `locks`, the app's own services, types and
// data. A separate ambient file, so that a block's own imports and declarations shadow it.
const prelude = `
import type { Collection, MongoClient } from 'mongodb';
import type { LockService } from 'nestjs-mongo-lock';

declare global {
  /** The injected LockService. */
  const locks: LockService;

  // Values the examples work on.
  const id: string;
  const accountId: string;
  const amount: number;
  const sessionId: string;
  const client: MongoClient;
  const MONGO_CLIENT: symbol;
  const accounts: Collection<{ _id: string; balance: number }>;
  const ledger: Collection<{ account: string; amount: number }>;
  const invoices: Collection<{ _id: string; status: string; lastFence: bigint }>;

  // The app's own work.
  function closeInvoice(id: string, fence: bigint, signal: AbortSignal): Promise<void>;
  function transfer(signal: AbortSignal): Promise<void>;
  function runJob(signal: AbortSignal): Promise<void>;
  function buildReport(): Promise<void>;
  function importCatalogue(): Promise<void>;
  function runBigExport(): Promise<void>;

  // The app's own types and classes.
  interface Account {
    _id: string;
    balance: number;
    version: number;
  }
  interface Article {
    _id: string;
    title: string;
    version: number;
  }
  interface Order {
    id: string;
  }
  class ArticleDto {
    title: string;
  }
  class PaymentsService {
    charge(id: string, options: { fence: bigint; signal: AbortSignal }): Promise<void>;
  }
  class LedgerService {
    post(account: string, cents: number): Promise<void>;
  }
  class OrdersController {}
}
export {};
`;

// @nestjs/config is not a dependency of this repository; the README's forRootAsync example
// uses these two of its names.
const nestConfig = `
declare module '@nestjs/config' {
  export declare class ConfigModule {}
  export declare class ConfigService {
    getOrThrow<T = any>(propertyPath: string): T;
  }
}
`;

const virtualDir = join(root, 'test/readme/__doc_examples__');
const preludeFile = join(virtualDir, 'prelude.d.ts');
const nestConfigFile = join(virtualDir, 'nestjs-config.d.ts');

/** The in-memory file of a block: its code, made a module (`export {}`). */
function fileOf(block: Block): string {
  return join(virtualDir, `${block.name.replace(/[^\w]/g, '_')}.ts`);
}

/** The in-memory files of `sources` (file name to code) with the prelude, type-checked. */
function check(compiler: DocCompiler, sources: Map<string, string>) {
  return compile(
    compiler,
    new Map(sources).set(preludeFile, prelude).set(nestConfigFile, nestConfig),
  );
}

/** The messages of a file's diagnostics. */
function messagesOf(diagnostics: readonly ts.Diagnostic[]): string {
  return diagnostics.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')).join('\n');
}

const current = currentCompiler();
let declarations: { dir: string; dispose(): void } | undefined;
let lowest: DocCompiler | Error | undefined;
/** TypeScript 5.1 against the package's declarations, emitted once per run (or failed once). */
function lowestCompilerOnce(): DocCompiler {
  if (lowest === undefined) {
    try {
      declarations = emitDeclarations();
      lowest = lowestCompiler(declarations.dir);
    } catch (error) {
      lowest = error as Error;
    }
  }
  if (lowest instanceof Error) throw lowest;
  return lowest;
}
afterAll(() => declarations?.dispose());

/** Blocks that say they need TypeScript 5.2 (`await using`): not for the 5.1 check. */
const needs52 = (block: Block) => /TypeScript 5\.2 or later/.test(block.source);

const checkers = new Map<DocCompiler, (file: string) => readonly ts.Diagnostic[]>();

/** The type errors of a block under `compiler`, each as `document:line: message`. */
function typeErrors(compiler: DocCompiler, block: Block): string[] {
  let diagnosticsOf = checkers.get(compiler);
  if (diagnosticsOf === undefined) {
    // Every block in one program: the marked ones too, to show that they need 5.2.
    diagnosticsOf = check(
      compiler,
      new Map(tsBlocks.map((each) => [fileOf(each), `${each.source}\nexport {};\n`])),
    );
    checkers.set(compiler, diagnosticsOf);
  }
  return diagnosticsOf(fileOf(block)).map((diagnostic) => {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
    if (diagnostic.file === undefined || diagnostic.start === undefined) return message;
    const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
    const where =
      diagnostic.file.fileName === fileOf(block)
        ? `${block.document}:${block.firstLine + line}`
        : `${diagnostic.file.fileName}:${line + 1}`;
    return `${where}: TS${diagnostic.code} ${message}`;
  });
}

jest.setTimeout(120_000);

describe('TypeScript examples of the README and the guides', () => {
  describe.each(documents.filter((document) => /^ *```ts\s*$/m.test(text.get(document)!)))(
    '%s',
    (document) => {
      it('has its ts blocks found, every one', () => {
        const fences = text.get(document)!.match(/^ *```ts\s*$/gm)!.length;
        const found = tsBlocks.filter((block) => block.document === document).length;
        expect(found).toBeGreaterThan(0);
        expect(found).toBe(fences);
      });
    },
  );

  it.each(tsBlocks.map((block) => [block.name, block] as const))('%s compiles', (_, block) => {
    expect(typeErrors(current, block)).toEqual([]);
  });

  it.each(tsBlocks.filter((block) => !needs52(block)).map((block) => [block.name, block] as const))(
    '%s compiles with TypeScript 5.1 against the declarations',
    (_, block) => {
      expect(typeErrors(lowestCompilerOnce(), block)).toEqual([]);
    },
  );

  it('leaves out of the 5.1 check exactly the blocks that say they need 5.2, which 5.1 fails', () => {
    const marked = tsBlocks.filter(needs52);
    expect(marked.length).toBeGreaterThan(0);
    expect(marked).toEqual(tsBlocks.filter((block) => /\bawait using\b/.test(block.source)));
    for (const block of marked) expect(typeErrors(lowestCompilerOnce(), block)).not.toEqual([]);
  });

  it("has the package's declaration files type-check with TypeScript 5.1 and skipLibCheck off", () => {
    expect(declarationErrors(lowestCompilerOnce(), declarations!.dir)).toEqual([]);
  });

  it('names the language of every code block (text for what is not code)', () => {
    expect(allBlocks.filter((block) => block.language === '').map((block) => block.name)).toEqual(
      [],
    );
  });

  it.each([
    ['TypeScript 6', () => current],
    ['TypeScript 5.1', lowestCompilerOnce],
  ] as const)('fails a broken example (%s)', (_, compiler) => {
    const file = join(virtualDir, 'broken.ts');
    const broken = `await locks.withLock('k', (lock) => lock.fenceToken);\nexport {};\n`;
    expect(messagesOf(check(compiler(), new Map([[file, broken]]))(file))).toMatch(
      /Property 'fenceToken' does not exist on type 'LockHandle'/,
    );
  });
});

describe('what the documents say', () => {
  it('the README is a front page: at most 300 lines', () => {
    expect(text.get('README.md')!.split('\n').length).toBeLessThanOrEqual(300);
  });

  it('says that await using needs TypeScript 5.2, where the requirements are and at each use', () => {
    expect(text.get('README.md')).toMatch(/`await using` example below needs 5\.2/);
    const uses = tsBlocks.filter((block) => /\bawait using\b/.test(block.source));
    expect(uses.length).toBeGreaterThan(0);
    for (const block of uses) expect(block.source).toMatch(/TypeScript 5\.2 or later/);
  });

  it('does not point to lock.session.client, which the driver typings hide', () => {
    for (const document of documents) expect(text.get(document)).not.toMatch(/session\.client/);
    // Why: ClientSession's client is excluded from the mongodb package's public typings.
    const file = join(virtualDir, 'session-client.ts');
    const diagnosticsOf = check(
      current,
      new Map([
        [
          file,
          `import type { ClientSession, MongoClient } from 'mongodb';
declare const session: ClientSession;
export const client: MongoClient = session.client;`,
        ],
      ]),
    );
    expect(messagesOf(diagnosticsOf(file))).toMatch(
      /Property 'client' does not exist on type 'ClientSession'/,
    );
  });

  it('links every guide from the README', () => {
    const readme = text.get('README.md')!;
    const guides = documents.filter((document) => document.startsWith('docs/'));
    expect(guides.filter((guide) => !readme.includes(`](${guide})`))).toEqual([]);
  });

  it('has every relative link and anchor resolve', () => {
    const broken: string[] = [];
    for (const document of documents) {
      const prose = withoutCode(text.get(document)!);
      for (const [, link] of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/i.test(link)) continue;
        const [path, anchor] = link.split('#');
        const target = path ? normalize(join(dirname(document), path)) : document;
        if (!existsSync(join(root, target))) broken.push(`${document}: ${link} (no such file)`);
        else if (anchor !== undefined && !anchorsOf(target).has(anchor)) {
          broken.push(`${document}: ${link} (no such anchor)`);
        }
      }
    }
    expect(broken).toEqual([]);
  });
});

/** The text without fenced blocks, where a `#` starts no heading. */
function withoutBlocks(markdown: string): string {
  return markdown.replace(/^( *)```[\s\S]*?^\1```/gm, '');
}

/** The text without fenced blocks and inline code, where a `](` is not a link. */
function withoutCode(markdown: string): string {
  return withoutBlocks(markdown).replace(/`[^`\n]*`/g, '');
}

/** The anchors GitHub gives a Markdown file's headings (and its explicit `<a id>`s). */
function anchorsOf(path: string): Set<string> {
  if (!path.endsWith('.md')) return new Set();
  const markdown = readFileSync(join(root, path), 'utf8');
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const [, heading] of withoutBlocks(markdown).matchAll(/^#{1,6} (.*)$/gm)) {
    const slug = heading
      .trim()
      .toLowerCase()
      .replace(/`/g, '')
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(slug);
    seen.set(slug, (count ?? -1) + 1);
    anchors.add(count === undefined ? slug : `${slug}-${count + 1}`);
  }
  for (const [, id] of markdown.matchAll(/<a id="([^"]+)"/g)) anchors.add(id);
  return anchors;
}
