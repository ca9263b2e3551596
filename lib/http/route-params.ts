/** Nest's `PATH_METADATA` (`@Controller`, `@Get`...): the same value in Nest 10 to 12. */
const PATH_METADATA = 'path';

// `:name` (path-to-regexp, find-my-way) and path-to-regexp v8's `*name` / `{*name}`.
const NAMED_PARAM = /[:*]([A-Za-z_$][\w$]*)/g;
// What the pattern above does not read: a bare `*` or `:`, regexp groups, quoted or escaped names.
const UNREADABLE = /[:*](?![A-Za-z_$])|[()"\\]/;

/** The parameter names of one path, or `undefined` when the path cannot be read that way. */
function paramNamesOf(path: unknown): string[] | undefined {
  if (typeof path !== 'string' || UNREADABLE.test(path)) return undefined;
  return [...path.matchAll(NAMED_PARAM)].map(([, name]) => name);
}

/**
 * The route parameters a handler's controller and method paths name (arrays: every path's), or
 * `undefined` when it is no route or a path cannot be read. A global prefix or a `RouterModule`
 * path may add parameters these do not show.
 */
export function routeParamNames(controller: object, handler: object): Set<string> | undefined {
  const handlerPaths: unknown = Reflect.getMetadata(PATH_METADATA, handler);
  if (handlerPaths === undefined) return undefined;
  const controllerPaths: unknown = Reflect.getMetadata(PATH_METADATA, controller);
  const names = new Set<string>();
  for (const paths of [controllerPaths, handlerPaths]) {
    for (const path of Array.isArray(paths) ? (paths as unknown[]) : [paths ?? '/']) {
      const found = paramNamesOf(path);
      if (!found) return undefined;
      for (const name of found) names.add(name);
    }
  }
  return names;
}
