// Finds and loads the MongoDB specification test files, and tells their two formats apart.
import { EJSON } from 'bson';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';

export type SpecFormat = 'unified' | 'crud-v1';

export interface SpecFile {
  /** Path relative to the spec folder, with forward slashes: the key the skip list uses. */
  name: string;
  path: string;
  format: SpecFormat;
  content: any;
}

const PROJECT_ROOT = resolve(__dirname, '..', '..', '..');

/** `MONGO_SPEC_DIR`, else `../shared/mongo-spec` beside the project. */
export function defaultSpecDir(): string {
  return resolve(PROJECT_ROOT, process.env.MONGO_SPEC_DIR ?? join('..', 'shared', 'mongo-spec'));
}

export function specDirExists(dir: string): boolean {
  return existsSync(dir) && statSync(dir).isDirectory();
}

/** Every JSON test file under `dir`, sorted, without the unified format's JSON schemas. */
export function findSpecFiles(dir: string): string[] {
  const found: string[] = [];
  const walk = (folder: string) => {
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.json') && !/^schema-.*\.json$/.test(entry.name)) {
        found.push(path);
      }
    }
  };
  walk(dir);
  return found.sort();
}

/** Parses a file as Extended JSON (relaxed or canonical, as the formats require). */
export function loadSpecFile(root: string, path: string): SpecFile {
  const content = EJSON.parse(readFileSync(path, 'utf8'), { relaxed: true });
  const format: SpecFormat = 'schemaVersion' in content ? 'unified' : 'crud-v1';
  return { name: relative(root, path).split(sep).join('/'), path, format, content };
}
