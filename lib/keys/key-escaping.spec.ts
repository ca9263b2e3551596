import { InvalidLockKeyError } from '../errors';
import { encodedCharacters, escapeKeyValue, hasSeparatingCharacter } from './key-escaping';
import { compileLockKeys, parseKeyTemplate } from './key-template';

const compiled = new Map<string, ReturnType<typeof compileLockKeys>>();

function render(template: string, ...args: unknown[]): string {
  let resolve = compiled.get(template);
  if (!resolve) {
    resolve = compileLockKeys(template, 'C.m');
    compiled.set(template, resolve);
  }
  const [key] = resolve({ type: 'method', args, className: 'C', methodName: 'm' });
  return key;
}

/** Every string of length 1..maxLength over `alphabet`. */
function strings(alphabet: readonly string[], maxLength: number): string[] {
  let level = [''];
  const all: string[] = [];
  for (let length = 1; length <= maxLength; length += 1) {
    level = level.flatMap((prefix) => alphabet.map((char) => prefix + char));
    all.push(...level);
  }
  return all;
}

/** Every tuple of `count` values taken from `values`. */
function tuples(values: readonly string[], count: number): string[][] {
  let result: string[][] = [[]];
  for (let index = 0; index < count; index += 1) {
    result = result.flatMap((tuple) => values.map((value) => [...tuple, value]));
  }
  return result;
}

/** Renders every tuple and fails on the first key that two different tuples share. */
function expectInjective(template: string, allTuples: readonly string[][]): void {
  const seen = new Map<string, string[]>();
  for (const tuple of allTuples) {
    const key = render(template, ...tuple);
    const earlier = seen.get(key);
    if (earlier) {
      throw new Error(
        `${JSON.stringify(template)}: ${JSON.stringify(earlier)} and ${JSON.stringify(tuple)} both give ${JSON.stringify(key)}`,
      );
    }
    seen.set(key, tuple);
  }
  expect(seen.size).toBe(allTuples.length);
}

/** A small deterministic generator, so that a failure can be replayed. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1_664_525 + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
}

describe('key escaping: adversarial pairs', () => {
  it('keeps a tenant and a report apart whatever they contain (the issue’s example)', () => {
    const template = 'tenant:{args.0}:report:{args.1}';
    const first = render(template, 't1:report:q3', 'x');
    const second = render(template, 't1', 'q3:report:x');
    expect(first).not.toBe(second);
    expect(first).toBe('tenant:t1%3Areport%3Aq3:report:x');
    expect(second).toBe('tenant:t1:report:q3%3Areport%3Ax');
  });

  it.each<[string, string, unknown[], unknown[]]>([
    ['an encoded-looking value against the raw one', 'k:{args.0}', ['a%3Ab'], ['a:b']],
    ['the escape of % against a literal %25', 'k:{args.0}', ['%'], ['%25']],
    ['a trailing % against a leading one', 'k:{args.0}:{args.1}', ['a%', 'b'], ['a', '%b']],
    ['a separator inside the first value', 'k:{args.0}-{args.1}', ['a-b', 'c'], ['a', 'b-c']],
    ['a separator inside the last value', 'k:{args.0}.{args.1}', ['a', 'b.c'], ['a.b', 'c']],
  ])('%s', (_label, template, first, second) => {
    expect(render(template, ...first)).not.toBe(render(template, ...second));
  });

  it.each([
    ['{args.0}-{args.1}', ['a-b', 'c'], ['a', 'b-c']],
    ['{args.0}/{args.1}', ['a/b', 'c'], ['a', 'b/c']],
    ['{args.0}%:{args.1}', ['a%', 'b'], ['a', '%b']],
    ['{args.0}%:{args.1}', ['a%:b', 'c'], ['a', 'b%:c']],
    ['{args.0}→{args.1}', ['a→b', 'c'], ['a', 'b→c']],
    ['{args.0}x:{args.1}', ['ax:b', 'c'], ['a', 'bx:c']],
    ['{args.0}:{args.1}:{args.2}', ['a:b', 'c', 'd'], ['a', 'b:c', 'd']],
    ['{args.0}:{args.1}:{args.2}', ['a', 'b', 'c:d'], ['a', 'b:c', 'd']],
  ])('%s separates %j from %j', (template, first, second) => {
    expect(render(template, ...first)).not.toBe(render(template, ...second));
  });

  it('keeps apart keys of templates that share a prefix (`:` is always encoded)', () => {
    expect(render('{args.0}', 'order:5')).not.toBe(render('order:{args.0}', '5'));
    expect(render('order:{args.0}', '1:2')).not.toBe(render('order:{args.0}:{args.1}', '1', '2'));
  });

  it.each<[string, string[]]>([
    ['tenant:{args.0}:report:{args.1}', ['r', '3', 'A', ':', '%', 't']],
    ['{args.0}-{args.1}', ['a', '3', 'A', '-', '%', '2']],
    ['{args.0}x-{args.1}', ['x', '3', 'A', '-', '%', '2']],
    ['{args.0}-x{args.1}', ['x', '3', 'A', '-', '%', 'D']],
    ['{args.0}%:{args.1}', ['a', '3', 'A', ':', '%', '2']],
    ['{args.0}.%3A{args.1}', ['.', '3', 'A', ':', '%', '2']],
    ['{args.0}:{args.1}%', ['a', '3', 'A', ':', '%', '5']],
  ])('never collides on every pair of short values for %j', (template, alphabet) => {
    // Values made of the template's own characters, the escape character and hex digits.
    expectInjective(template, tuples(strings(alphabet, 3), 2));
  });

  it('never collides on every triple of short values', () => {
    const alphabet = ['k', '.', '-', '%', '2', 'E'];
    expectInjective('k{args.0}.{args.1}-{args.2}', tuples(strings(alphabet, 2), 3));
  });

  it('never collides on random templates over their own characters', () => {
    const random = seededRandom(20_240_611);
    const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)];
    const separators = [':', '-', '.', '%', 'x', '3', 'A', '→', '{{', '}}'];
    for (let round = 0; round < 40; round += 1) {
      let template = random() < 0.5 ? '' : pick(separators);
      const placeholders = 2 + Math.floor(random() * 2);
      for (let index = 0; index < placeholders; index += 1) {
        if (index > 0) {
          let separator = '';
          while (!hasSeparatingCharacter(separator.replace(/\{\{|\}\}/g, '{'))) {
            separator += pick(separators);
          }
          template += separator;
        }
        template += `{args.${index}}`;
      }
      if (random() < 0.5) template += pick(separators);
      // The most adversarial values: made of the template's literal characters.
      const literal = template.replace(/\{args\.\d\}/g, '').replace(/\{\{|\}\}/g, '{');
      const alphabet = [...new Set([...literal, '%', 'a', '3'])];
      const length = placeholders === 2 ? 2 : 1;
      expectInjective(template, tuples(strings(alphabet, length), placeholders));
    }
  });
});

describe('key escaping: the encoding', () => {
  it('leaves ordinary values alone, so existing keys do not change', () => {
    expect(render('order:{args.0}', '42')).toBe('order:42');
    expect(render('order:{args.0}', 'a-b_c.d')).toBe('order:a-b_c.d');
    expect(render('{args.0}/{args.1}', -1.5, 12n)).toBe('-1.5/12');
    expect(render('user:{args.0}', 'zoë')).toBe('user:zoë');
  });

  it('percent-encodes %, : and the template’s punctuation as UTF-8 with upper-case hex', () => {
    expect(render('k:{args.0}', 'a%b:c')).toBe('k:a%25b%3Ac');
    expect(render('{args.0}-{args.1}', 'a-b', 'c')).toBe('a%2Db-c');
    expect(render('{args.0}→{args.1}', 'a→b', 'c')).toBe('a%E2%86%92b→c');
    expect(render('a{{b}}:{args.0}', '{x}')).toBe('a{b}:%7Bx%7D');
    // Letters and digits of the template's text are never encoded.
    expect(render('order:{args.0}', 'order')).toBe('order:order');
  });

  it('encodes characters outside the BMP as one character', () => {
    expect(render('{args.0}😀{args.1}', 'a😀', 'b')).toBe('a%F0%9F%98%80😀b');
  });

  it('exposes the pieces it is built from', () => {
    const encoded = encodedCharacters('tenant::report:');
    expect([...encoded].sort()).toEqual(['%', ':']);
    expect(escapeKeyValue('t1:report:q3', encoded)).toBe('t1%3Areport%3Aq3');
    expect(hasSeparatingCharacter('%')).toBe(false);
    expect(hasSeparatingCharacter('x1')).toBe(false);
    expect(hasSeparatingCharacter('x%:')).toBe(true);
  });
});

describe('key templates: placeholders must be separated', () => {
  it.each([
    ['{args.0}{args.1}', '{args.0} and {args.1}'],
    ['k:{params.a}x{params.b}', '{params.a} and {params.b}'],
    ['{args.0}42{args.1}', '{args.0} and {args.1}'],
    ['{args.0}%{args.1}', '{args.0} and {args.1}'],
    ['{args.0}:{args.1}{args.2}', '{args.1} and {args.2}'],
  ])('refuses %j when the decorator is applied, naming both placeholders', (template, pair) => {
    expect(() => parseKeyTemplate(template)).toThrow(InvalidLockKeyError);
    expect(() => parseKeyTemplate(template)).toThrow(pair);
    expect(() => compileLockKeys(template, 'C.m')).toThrow(/must be separated/);
  });

  it.each(['{args.0}:{args.1}', '{args.0}%:{args.1}', 'a{args.0}{{b{args.1}', '{args.0} {args.1}'])(
    'accepts %j',
    (template) => {
      expect(() => parseKeyTemplate(template)).not.toThrow();
    },
  );
});
