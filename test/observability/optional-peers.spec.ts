import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

// The optional peers may appear in the library's types only behind their own entry point: an
// app without them type-checks every declaration the main entry reaches (`skipLibCheck: false`)
// and fails on a `from '<peer>'` or `import('<peer>')` (TS2307). At run time the main entry may
// only `require` one lazily (lib/telemetry/opentelemetry-api.ts). `npm run test:compat` checks
// the packed declarations in apps without the peers; this is the quick check of the sources.
const lib = path.join(__dirname, '..', '..', 'lib');

/** Where each optional peer may be imported: its entry's folder. */
const OPTIONAL_PEERS: Record<string, string | null> = {
  '@opentelemetry/api': null, // nowhere: lib/telemetry declares the shapes it uses
  '@nestjs/terminus': 'health',
};

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) return sources(file);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') ? [file] : [];
  });
}

describe('optional peers in the library sources', () => {
  it('are imported, as types or values, only behind their own entry point', () => {
    const found: string[] = [];
    for (const file of sources(lib)) {
      const relative = path.relative(lib, file);
      const text = readFileSync(file, 'utf8');
      for (const [peer, allowedIn] of Object.entries(OPTIONAL_PEERS)) {
        if (allowedIn && relative.startsWith(`${allowedIn}${path.sep}`)) continue;
        const quoted = `['"]${peer.replace(/[/.]/g, '\\$&')}(/[^'"]*)?['"]`;
        const imports = new RegExp(`(\\bfrom\\s*${quoted}|\\bimport\\s*\\(\\s*${quoted})`);
        if (imports.test(text)) found.push(`${relative}: ${peer}`);
      }
    }
    expect(found).toEqual([]);
  });
});
