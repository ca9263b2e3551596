import type { Document } from 'bson';
import type { Options } from 'mingo/types';

/**
 * What compiled expressions and their operators share (compiled-expressions.ts says how and
 * why expressions are compiled).
 */

/** What one evaluation needs besides the document. */
export interface Bindings {
  /** Literals and mingo-evaluated subtrees of the current command, in walk order. */
  readonly params: unknown[];
  /** The command's variables: NOW, CLUSTER_TIME and `let` values. */
  readonly variables: Document;
  /** The command's mingo options, for subtrees mingo evaluates. */
  readonly options: Partial<Options>;
  /**
   * Subtrees mingo evaluates, by slot, once bound to NOW / CLUSTER_TIME: bound at their first
   * evaluation, not while the shape is written, since most (a `$size` behind an `$or` that
   * is already true) are never evaluated.
   */
  bound?: unknown[];
  /**
   * Variables bound by the compiled `$let`, `$filter`, `$map` and `$reduce` being evaluated,
   * innermost binding of each name (set and restored around each use).
   */
  locals?: Map<string, unknown>;
}

export type Evaluate = (document: Document, bindings: Bindings) => unknown;

/** Names of the variables in scope where an expression stands, outermost first. */
export type Scope = readonly string[];

export interface Split {
  /** Structure of the argument, part of the shape: an array's length, OBJECT_FORM or SINGLE_FORM. */
  form: number;
  items: unknown[];
  /** The variables each item binds besides the enclosing ones (`$$this` in `$filter`'s cond). */
  binds?: readonly Scope[];
}

export const OBJECT_FORM = -1;
export const SINGLE_FORM = -2;

export interface NativeOperator {
  /** The argument's sub-expressions when its structure is one compiled here. */
  split(argument: unknown, scope: Scope): Split | undefined;
  /** `viaMingo` evaluates the whole operator with mingo (for values the mirror leaves to it). */
  build(items: Evaluate[], viaMingo: Evaluate, split: Split): Evaluate;
}

export const isNil = (value: unknown): value is null | undefined =>
  value === null || value === undefined;
/** mingo's `truthy` in strict mode (the server's mode): '' is true. */
export const truthy = (value: unknown): boolean => !!value || value === '';

export function arrayOf(length?: number): (argument: unknown) => Split | undefined {
  return (argument) =>
    Array.isArray(argument) && (length === undefined || argument.length === length)
      ? { form: argument.length, items: argument }
      : undefined;
}

/** A single (non-array) argument. */
export function single(argument: unknown): Split | undefined {
  return Array.isArray(argument) ? undefined : { form: SINGLE_FORM, items: [argument] };
}

export function evaluateAll(items: Evaluate[], document: Document, bindings: Bindings): unknown[] {
  const values = new Array<unknown>(items.length);
  for (let i = 0; i < items.length; i++) values[i] = items[i](document, bindings);
  return values;
}
