/**
 * How a value is written into a key template so distinct values never give one key (the rule is
 * in docs/http.md, "Values are escaped"; keys are stored, so it must never change). Two
 * placeholders must be separated by a character other than a letter, digit or `%`: it never
 * occurs in an encoded value, so its first occurrence ends the value.
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

/** Percent-encodes the characters of `encoded` in one substituted value. */
export function escapeKeyValue(value: string, encoded: ReadonlySet<string>): string {
  let out = '';
  for (const char of value) out += encoded.has(char) ? percentEncode(char) : char;
  return out;
}

/** Whether text between two placeholders holds a separator: not a letter, digit or `%`. */
export function hasSeparatingCharacter(text: string): boolean {
  return [...text].some((char) => char !== '%' && isSymbol(char));
}
