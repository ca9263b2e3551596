import type { Document } from 'bson';
import type { Options } from 'mingo/types';
import { CommandError } from '../commands/errors';

type Collation = NonNullable<Options['collation']>;

/**
 * A command's (or statement's) collation in the form mingo's sort understands: ICU locale
 * names with underscores (`en_US`) become BCP 47 (`en-US`); `simple` means none.
 */
export function normaliseCollation(raw: unknown): Collation | undefined {
  if (!raw || typeof raw !== 'object') return undefined;
  const spec = raw as Document;
  if (typeof spec.locale !== 'string') {
    throw new CommandError(40414, "BSON field 'collation.locale' is missing but a required field");
  }
  if (spec.locale === 'simple') return undefined;
  const locale = spec.locale.replace(/_/g, '-');
  try {
    new Intl.Collator(locale);
  } catch {
    throw new CommandError(2, `Field 'locale' is invalid in: { locale: "${spec.locale}" }`);
  }
  return { ...(spec as Collation), locale };
}

/** Strength 1 and 2 compare strings case-insensitively (1 also ignores accents). */
function caseInsensitive(collation: Collation): boolean {
  const strength = Number(collation.strength ?? 3);
  return strength <= 2 && !(strength === 1 && collation.caseLevel === true);
}

export function collator(collation: Collation): Intl.Collator {
  const strength = Number(collation.strength ?? 3);
  const sensitivity =
    strength === 1
      ? collation.caseLevel
        ? 'case'
        : 'base'
      : strength === 2
        ? 'accent'
        : 'variant';
  return new Intl.Collator(collation.locale, { sensitivity });
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function insensitive(text: string): RegExp {
  return new RegExp(`^${escapeRegExp(text)}$`, 'i');
}

function rewriteCondition(condition: unknown): unknown {
  if (typeof condition === 'string') return insensitive(condition);
  if (
    !condition ||
    typeof condition !== 'object' ||
    Array.isArray(condition) ||
    condition instanceof RegExp
  )
    return condition;
  if ('_bsontype' in condition || condition instanceof Date) return condition;
  const operators = condition as Document;
  if (!Object.keys(operators).every((key) => key.startsWith('$'))) return condition;
  const result: Document = {};
  for (const [operator, operand] of Object.entries(operators)) {
    if (operator === '$eq' && typeof operand === 'string') result.$regex = insensitive(operand);
    else if (operator === '$ne' && typeof operand === 'string') result.$not = insensitive(operand);
    else if ((operator === '$in' || operator === '$nin') && Array.isArray(operand)) {
      result[operator] = operand.map((item) =>
        typeof item === 'string' ? insensitive(item) : item,
      );
    } else if (operator === '$elemMatch' && operand && typeof operand === 'object') {
      result[operator] = rewriteFilter(operand as Document);
    } else result[operator] = operand;
  }
  return result;
}

function rewriteFilter(filter: Document): Document {
  const result: Document = {};
  for (const [key, value] of Object.entries(filter)) {
    if ((key === '$and' || key === '$or' || key === '$nor') && Array.isArray(value)) {
      result[key] = value.map((clause) => rewriteFilter(clause as Document));
    } else if (key.startsWith('$')) result[key] = value;
    else result[key] = rewriteCondition(value);
  }
  return result;
}

/**
 * mingo's query operators ignore collation. For the case-insensitive strengths, string
 * equality conditions become anchored case-insensitive regexes (accents still count).
 */
export function applyCollationToFilter(
  filter: Document,
  collation: Collation | undefined,
): Document {
  if (!collation || !caseInsensitive(collation)) return filter;
  return rewriteFilter(filter);
}

/** `$match` stages of a pipeline under a collation. */
export function applyCollationToPipeline(
  pipeline: Document[],
  collation: Collation | undefined,
): Document[] {
  if (!collation || !caseInsensitive(collation)) return pipeline;
  return pipeline.map((stage) =>
    '$match' in stage ? { $match: rewriteFilter(stage.$match as Document) } : stage,
  );
}
