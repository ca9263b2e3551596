/**
 * How a value is written into a key template so distinct values never give one key (else
 * `tenant:{args.0}:report:{args.1}` with `t1:report:q3`,`x` and `t1`,`q3:report:x` collide).
 * Stable across versions, since keys are stored: in a value, `%`, `:` and each character of the
 * template's literal text other than an ASCII letter or digit become `%XX` (upper-case hex) per
 * UTF-8 byte; the rest is kept (`order:{params.id}` with `a-b` is unchanged). Two placeholders
 * must be separated by a character other than a letter, digit or `%`: it never occurs in an
 * encoded value (it is encoded; encodings use only `%` and hex), so its first occurrence ends
 * the value, and decoding gives the value back.
 */

/** Encoded in every substituted value, whatever the template: the escape itself and `:`. */
const ALWAYS_ENCODED = ['%', ':'] as const;

/** Neither a letter, a digit, nor a lone surrogate (no UTF-8 form: key validation refuses it). */
function isSymbol(char: string): boolean {
  return !/^[A-Za-z0-9\uD800-\uDFFF]$/.test(char);
}

export function encodedCharacters(literalText: string): ReadonlySet<string> {
  // Iterating a string yields code points: a character outside the BMP is one entry.
  return new Set<string>([...ALWAYS_ENCODED, ...[...literalText].filter(isSymbol)]);
}

/** `%XX` per UTF-8 byte of `char`. */
function percentEncode(char: string): string {
  return Buffer.from(char, 'utf8').toString('hex').toUpperCase().replace(/../g, '%$&');
}

/**
 * Percent-encodes the characters of `encoded` in one substituted value.
 * @example
 * escapeKeyValue('t1:report:q3', encodedCharacters('tenant::report:')); // 't1%3Areport%3Aq3'
 */
export function escapeKeyValue(value: string, encoded: ReadonlySet<string>): string {
  let out = '';
  for (const char of value) out += encoded.has(char) ? percentEncode(char) : char;
  return out;
}

/** Whether text between two placeholders holds a separator: not a letter, digit or `%`. */
export function hasSeparatingCharacter(text: string): boolean {
  return [...text].some((char) => char !== '%' && isSymbol(char));
}
