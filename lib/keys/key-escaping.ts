/**
 * How a value filled into a key template is written into the key, so that distinct values can
 * never give one key: `tenant:{args.0}:report:{args.1}` with `t1:report:q3` and `x` must not
 * build the same key as with `t1` and `q3:report:x`.
 *
 * The rule, stable across versions because keys are stored:
 * - In a substituted value, `%`, `:` and every character other than an ASCII letter or digit
 *   that appears in the template's literal text are percent-encoded: each UTF-8 byte as `%`
 *   and two upper-case hex digits (`:` is `%3A`, `%` is `%25`, `→` is `%E2%86%92`). Every
 *   other character is kept as it is, so `order:{params.id}` with `42` or `a-b` is unchanged.
 * - Two placeholders must be separated by literal text holding a character other than a
 *   letter, a digit or `%` (see {@link hasSeparatingCharacter}); the template is refused
 *   otherwise.
 *
 * Why that is enough: a separating character `c` never occurs in an encoded value (it is
 * encoded, and encodings use only `%` and hex digits), so the first `c` after a value's start
 * marks, at a known offset, where the value ends; the template's fixed text then lines up, and
 * percent-decoding gives the value back. Equal keys therefore mean equal values.
 */

/** Encoded in every substituted value, whatever the template: the escape itself and `:`. */
const ALWAYS_ENCODED = ['%', ':'] as const;

const LETTER_OR_DIGIT = /^[A-Za-z0-9]$/;
const LONE_SURROGATE = /^[\uD800-\uDFFF]$/;

/** The characters to encode in the values of a template with this literal text. */
export function encodedCharacters(literalText: string): ReadonlySet<string> {
  const encoded = new Set<string>(ALWAYS_ENCODED);
  // Iterating a string yields code points: a character outside the BMP is one entry.
  for (const char of literalText) {
    // A lone surrogate has no UTF-8 form; the key validation refuses it anyway.
    if (!LETTER_OR_DIGIT.test(char) && !LONE_SURROGATE.test(char)) encoded.add(char);
  }
  return encoded;
}

function percentEncode(char: string): string {
  let out = '';
  for (const byte of Buffer.from(char, 'utf8')) {
    out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/**
 * Writes one substituted value with the characters of `encoded` percent-encoded.
 *
 * @example
 * escapeKeyValue('t1:report:q3', encodedCharacters('tenant::report:')); // 't1%3Areport%3Aq3'
 */
export function escapeKeyValue(value: string, encoded: ReadonlySet<string>): string {
  let out = '';
  for (const char of value) out += encoded.has(char) ? percentEncode(char) : char;
  return out;
}

/**
 * Whether literal text between two placeholders lets a key be split back into its values: it
 * must hold a character that is encoded in values and never part of an encoding, that is
 * anything but a letter, a digit or `%`.
 */
export function hasSeparatingCharacter(text: string): boolean {
  for (const char of text) {
    if (char !== '%' && !LETTER_OR_DIGIT.test(char) && !LONE_SURROGATE.test(char)) return true;
  }
  return false;
}
