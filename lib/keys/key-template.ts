import { isBson } from '../store/bson-values';
import { posix } from 'node:path';
import { InvalidLockKeyError, MongoLockError } from '../errors';
import { MESSAGES } from '../mongo-lock.messages';
import { encodedCharacters, escapeKeyValue, hasSeparatingCharacter } from './key-escaping';
import { MAX_LOCK_KEY_BYTES, validateLockKey } from './lock-key';

/** Where a `{source.path}` placeholder reads from. HTTP sources exist only on HTTP handlers. */
const KEY_TEMPLATE_SOURCES = ['params', 'query', 'body', 'user', 'headers', 'args'] as const;
type KeyTemplateSource = (typeof KEY_TEMPLATE_SOURCES)[number];

/**
 * The values a key template or key function is resolved against.
 * @example
 * \@Locked((ctx) => `tenant:${String((ctx.user as User).tenantId)}:report`)
 */
export interface LockKeyContext {
  /** `'http'`, `'rpc'`, `'ws'` for handlers (`ExecutionContext.getType()`), else `'method'`. */
  type: string;
  /**
   * A provider method's own arguments, or a handler's transport arguments
   * (`ExecutionContext.getArgs()`: HTTP `[req, res]`, RPC `[data, ctx]`, WS `[client, data]`).
   */
  args: readonly unknown[];
  /** HTTP only: route parameters, query, parsed body, `request.user`, lower-case headers. */
  params?: unknown;
  query?: unknown;
  body?: unknown;
  user?: unknown;
  headers?: unknown;
  /**
   * The class of the instance called (a subclass's for an inherited method) and the method, for
   * key functions that want them.
   */
  className: string;
  methodName: string;
}

/** Keys given to `@Locked`: templates, or a function of the call's context. */
export type LockKeySpec =
  string | readonly string[] | ((context: LockKeyContext) => string | readonly string[]);

/** Turns a call's context into lock keys; built once per decorated method. */
export type LockKeyResolver = (context: LockKeyContext) => string[];

type ValuePart = { kind: 'value'; source: KeyTemplateSource; path: string[]; placeholder: string };
type TemplatePart = { kind: 'text'; text: string } | ValuePart;

interface ParsedKeyTemplate {
  template: string;
  parts: TemplatePart[];
  /** Characters percent-encoded in substituted values (see `key-escaping.ts`). */
  encoded: ReadonlySet<string>;
}

// Segments that could reach an object's prototype machinery; refused whatever the source.
const FORBIDDEN_SEGMENTS = new Set(['__proto__', 'constructor', 'prototype']);
const SEGMENT = /^[A-Za-z0-9_$-]+$/;
const ARGUMENT_INDEX = /^(0|[1-9][0-9]{0,2})$/;

function fail(message: string): never {
  throw new InvalidLockKeyError(message);
}

function parsePlaceholder(template: string, placeholder: string): ValuePart {
  const [source, ...path] = placeholder.split('.');
  if (!(KEY_TEMPLATE_SOURCES as readonly string[]).includes(source)) {
    fail(MESSAGES.templateUnknownSource(template, placeholder, KEY_TEMPLATE_SOURCES));
  }
  if (path.length === 0) fail(MESSAGES.templateWholeSource(template, placeholder));
  for (const segment of path) {
    if (!SEGMENT.test(segment)) fail(MESSAGES.templateBadSegment(template, placeholder, segment));
    if (FORBIDDEN_SEGMENTS.has(segment)) {
      fail(MESSAGES.templateForbiddenSegment(template, placeholder, segment));
    }
  }
  if (source === 'args' && !ARGUMENT_INDEX.test(path[0])) {
    fail(MESSAGES.templateBadArgumentIndex(template, placeholder));
  }
  // Node and Fastify give header names in lower case.
  const normalised = source === 'headers' ? path.map((s) => s.toLowerCase()) : path;
  return {
    kind: 'value',
    source: source as KeyTemplateSource,
    path: normalised,
    placeholder: `{${placeholder}}`,
  };
}

/**
 * Parses a key template such as `'order:{params.id}'` (`{{`, `}}`: literal braces). Throws
 * `InvalidLockKeyError` when malformed or with unseparated placeholders (see `key-escaping.ts`).
 */
export function parseKeyTemplate(template: string): ParsedKeyTemplate {
  if (typeof template !== 'string' || template.length === 0) fail(MESSAGES.templateEmpty());
  const parts: TemplatePart[] = [];
  let text = '';
  let end = 0;
  let previous: ValuePart | undefined;
  // Two placeholders with nothing that separates them could split one key two ways.
  let unseparated: [ValuePart, ValuePart] | undefined;
  // At one place `{{` and `}}` come first; a brace no alternative takes is unmatched.
  for (const match of template.matchAll(/\{\{|\}\}|\{([^}]*)\}|[{}]/g)) {
    text += template.slice(end, match.index);
    end = match.index + match[0].length;
    if (match[1] === undefined && match[0].length === 1) {
      fail(MESSAGES.templateUnmatchedBrace(template, match.index));
    } else if (match[1] === undefined) {
      text += match[0][0];
    } else {
      const part = parsePlaceholder(template, match[1]);
      if (previous && !hasSeparatingCharacter(text)) unseparated ??= [previous, part];
      if (text) parts.push({ kind: 'text', text });
      parts.push((previous = part));
      text = '';
    }
  }
  text += template.slice(end);
  if (text) parts.push({ kind: 'text', text });
  if (unseparated) {
    const [first, second] = unseparated;
    fail(MESSAGES.templateUnseparated(template, first.placeholder, second.placeholder));
  }
  const texts = parts.flatMap((part) => (part.kind === 'text' ? [part.text] : []));
  const literalText = texts.join('');
  // Text no value can mend fails now, not as a 400 on every request.
  for (const each of texts.length > 0 ? [...texts, literalText] : []) {
    checkedKey(each, MESSAGES.templateNeverValid(template));
  }
  // Each placeholder adds a byte at least (a value is never empty).
  const leastBytes = Buffer.byteLength(literalText) + parts.length - texts.length;
  if (leastBytes > MAX_LOCK_KEY_BYTES) {
    fail(
      `${MESSAGES.templateNeverValid(template)}: its text and placeholders take at least ` +
        `${leastBytes} UTF-8 bytes, over ${MAX_LOCK_KEY_BYTES}`,
    );
  }
  return { template, parts, encoded: encodedCharacters(literalText) };
}

function describeKind(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'number') return 'a non-finite number';
  if (typeof value === 'string') return 'an empty string';
  return `of type ${typeof value}`;
}

function valueParts(templates: readonly string[]): { template: string; part: ValuePart }[] {
  return templates.flatMap((template) =>
    parseKeyTemplate(template).parts.flatMap((part) =>
      part.kind === 'value' ? [{ template, part }] : [],
    ),
  );
}

/** The placeholders of `templates` other than `{args...}`: values only an HTTP call has. */
export function httpOnlyPlaceholders(templates: readonly string[]) {
  return valueParts(templates)
    .filter(({ part }) => part.source !== 'args')
    .map(({ template, part }) => ({ template, placeholder: part.placeholder }));
}

/** The route parameters the `{params...}` placeholders of `templates` name, by template. */
export function routeParamPlaceholders(templates: readonly string[]) {
  return valueParts(templates)
    .filter(({ part }) => part.source === 'params')
    .map(({ template, part }) => ({ template, param: part.path[0] }));
}

/**
 * Non-empty strings, finite numbers, bigints, booleans and ObjectIds (as their hex, the text an
 * id has in a route); nothing else becomes part of a key.
 */
function scalarToKeyPart(value: unknown): string | undefined {
  if (typeof value === 'string') return value.length > 0 ? value : undefined;
  if (typeof value === 'number') return Number.isFinite(value) ? String(value) : undefined;
  if (isBson(value, 'ObjectId')) return value.toHexString();
  return typeof value === 'bigint' || typeof value === 'boolean' ? String(value) : undefined;
}

/**
 * A wildcard route parameter's path (Express 5 gives `*path` as its segments, decoded), made
 * as a path lookup would read it: empty and `.` segments left out, `..` resolved (`a//b/`,
 * `a%2Fb` and `a/x/../b` are `a/b`); undefined if it is none or empty.
 */
function wildcardPath(value: unknown): string | undefined {
  if (!Array.isArray(value) || !value.every((each) => typeof each === 'string')) return undefined;
  const path = posix.normalize(`/${value.join('/')}/`).slice(1, -1);
  return path === '' ? undefined : path;
}

/** The value at `path` in `root`, or `undefined` if there is none. */
export function readPath(root: unknown, path: readonly string[]): unknown {
  let value = root;
  for (const segment of path) {
    if (value === null || (typeof value !== 'object' && typeof value !== 'function')) {
      return undefined;
    }
    // `in` also sees getters of class instances (e.g. a user entity); whatever Object.prototype
    // offers is a function or `__proto__`, and both are refused.
    if (!(segment in value)) return undefined;
    value = (value as Record<string, unknown>)[segment];
  }
  return value;
}

/**
 * A missing value is the request's fault (`InvalidLockKeyError`, HTTP 400), but an HTTP route's
 * parameters come from its path: one missing is the template's bug (`MongoLockError`, HTTP 500,
 * logged). Elsewhere (ws, rpc) an interceptor may fill `params` from the client's message.
 */
function missingValueError(template: string, part: ValuePart, contextType: string): Error {
  const message = MESSAGES.templateValueMissing(template, part.placeholder, contextType);
  return part.source === 'params' && contextType === 'http'
    ? new MongoLockError(MESSAGES.routeParamMissing(message))
    : new InvalidLockKeyError(message);
}

/**
 * Fills a parsed template, escaping values (see `key-escaping.ts`); else `InvalidLockKeyError`,
 * or `MongoLockError` for a missing `{params...}` value.
 */
function renderKeyTemplate(parsed: ParsedKeyTemplate, context: LockKeyContext, escape = true) {
  let key = '';
  for (const part of parsed.parts) {
    if (part.kind === 'text') {
      key += part.text;
      continue;
    }
    const value = readPath(context[part.source], part.path);
    if (value === undefined) throw missingValueError(parsed.template, part, context.type);
    // A wildcard route's segments; `lockKey` ('method') fills a route's template by hand.
    const wildcard = part.source === 'params' && ['http', 'method'].includes(context.type);
    const text = (wildcard ? wildcardPath(value) : undefined) ?? scalarToKeyPart(value);
    if (text === undefined) {
      fail(MESSAGES.templateValueNotScalar(parsed.template, part.placeholder, describeKind(value)));
    }
    // Escaping only lengthens a value: one already too long is refused before that work.
    if (text.length > MAX_LOCK_KEY_BYTES) {
      checkedKey(key + text, MESSAGES.templateInvalidKey(parsed.template));
    }
    key += escape ? escapeKeyValue(text, parsed.encoded) : text;
  }
  return checkedKey(key, MESSAGES.templateInvalidKey(parsed.template));
}

/** Runs the core's key validation (length, NUL, empty), saying where the key came from. */
function checkedKey(key: string, origin: string): string {
  try {
    return validateLockKey(key);
  } catch (error) {
    if (!(error instanceof InvalidLockKeyError)) throw error;
    throw new InvalidLockKeyError(`${origin}: ${error.message}`, { cause: error });
  }
}

function keysFromFunctionResult(result: unknown, where: string): string[] {
  const keys = typeof result === 'string' ? [result] : result;
  if (
    !Array.isArray(keys) ||
    keys.length === 0 ||
    !Array.from(keys as unknown[]).every((key) => typeof key === 'string' && key.length > 0)
  ) {
    fail(MESSAGES.keyFunctionBadResult(where));
  }
  return (keys as string[]).map((key) => checkedKey(key, MESSAGES.keyFunctionInvalidKey(where)));
}

/** The values `lockKey` fills a template from: a call's context, as far as the template reads. */
export type LockKeyValues = Partial<
  Pick<LockKeyContext, 'params' | 'query' | 'body' | 'user' | 'headers' | 'args'>
>;

/**
 * The key `@Locked(template)` builds from `values`, each value escaped as the decorator escapes
 * it: for a `withLock` or `releaseScope` that must meet a decorated route or method. Throws
 * `InvalidLockKeyError` for a bad template, a missing value or a key that is too long.
 *
 * @example
 * // Meets @Locked('tenant:{user.tenantId}:report:{params.id}') on a route.
 * await locks.withLock(lockKey('tenant:{user.tenantId}:report:{params.id}', { user, params: { id } }), work);
 */
export function lockKey(template: string, values: LockKeyValues): string {
  const context = {
    ...values,
    type: 'method',
    args: values.args ?? [],
    className: '',
    methodName: '',
  };
  return renderKeyTemplate(parseKeyTemplate(template), context);
}

/**
 * Compiles `@Locked`'s keys into a resolver. Templates are parsed now, so a malformed one throws
 * when the class is defined.
 * @param where `Class.method`, for messages.
 * @param escape false for a document's `_id`, rendered as text (and limited as such), unescaped.
 */
export function compileLockKeys(spec: LockKeySpec, where: string, escape = true): LockKeyResolver {
  if (typeof spec === 'function') {
    return (context) => keysFromFunctionResult(spec(context), where);
  }
  const templates: readonly unknown[] = typeof spec === 'string' ? [spec] : spec;
  if (!Array.isArray(templates) || templates.length === 0) fail(MESSAGES.noKeys(where));
  // `Array.from`, not `map`: a hole of a sparse list is parsed (and refused) too.
  const parsed = Array.from(templates, (template) => parseKeyTemplate(template as string));
  return (context) => [...new Set(parsed.map((each) => renderKeyTemplate(each, context, escape)))];
}
