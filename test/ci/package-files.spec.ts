import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, posix } from 'node:path';

// What `npm pack` ships: the README's links and the guides error messages name must not be dead
// inside node_modules. `--ignore-scripts`: no build; dist/ is not what this is about.

const root = join(__dirname, '../..');

jest.setTimeout(60_000);

let packed: Set<string>;
beforeAll(() => {
  const run = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: root,
    encoding: 'utf8',
  });
  expect(run.status).toBe(0);
  const [pack] = JSON.parse(run.stdout) as [{ files: { path: string }[] }];
  packed = new Set(pack.files.map((file) => file.path));
});

/** The relative link targets of a Markdown text, without their `#anchor`. */
function relativeLinks(markdown: string): string[] {
  const targets = [...markdown.matchAll(/\]\(([^)\s]+)\)/g)].map(([, target]) => target);
  return targets
    .filter((target) => !/^[a-z]+:/i.test(target) && !target.startsWith('#'))
    .map((target) => target.split('#')[0]);
}

describe('the published package', () => {
  it("ships every file the README links to (the guides, BENCHMARKS.md, the guides' images)", () => {
    const links = relativeLinks(readFileSync(join(root, 'README.md'), 'utf8'));
    expect(links).toContain('docs/http.md');
    expect(links).toContain('BENCHMARKS.md');
    expect(links.filter((link) => !packed.has(link))).toEqual([]);
    expect(packed).toContain('docs/images/lock-board.png');
  });

  it('ships what every shipped guide links to', () => {
    const guides = [...packed].filter((path) => /^docs\/[^/]+\.md$/.test(path));
    expect(guides).toContain('docs/testing.md');
    const dead = guides.flatMap((guide) =>
      relativeLinks(readFileSync(join(root, guide), 'utf8'))
        .map((link) => posix.normalize(posix.join(posix.dirname(guide), link)))
        .filter((target) => target !== '.' && !packed.has(target)),
    );
    expect(dead).toEqual([]);
  });

  it('ships the figure BENCHMARKS.md shows', () => {
    const links = relativeLinks(readFileSync(join(root, 'BENCHMARKS.md'), 'utf8'));
    expect(links).toContain('bench/results/handoff-latency.svg');
    expect(links.filter((link) => !packed.has(link))).toEqual([]);
  });

  it('ships docs/upgrading.md, which error messages point to', () => {
    expect(packed).toContain('docs/upgrading.md');
  });

  it('ships nothing else: no tests, sources or tooling', () => {
    const shipped = ['BENCHMARKS.md', 'CHANGELOG.md', 'LICENSE', 'README.md', 'package.json'];
    const tops = new Set([...packed].map((path) => path.split('/')[0]));
    expect([...tops].filter((top) => ![...shipped, 'dist', 'docs', 'bench'].includes(top))).toEqual(
      [],
    );
    const bench = [...packed].filter((path) => path.startsWith('bench/'));
    expect(bench).toEqual(['bench/results/handoff-latency.svg']);
  });
});
