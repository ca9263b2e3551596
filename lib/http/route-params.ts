/** Nest's `PATH_METADATA` (`@Controller`, `@Get`...): the same value in Nest 10 to 12. */
const PATH_METADATA = 'path';

// `:name` (path-to-regexp, find-my-way) and path-to-regexp v8's `*name` / `{*name}`.
const NAMED_PARAM = /[:*]([A-Za-z_$][\w$]*)/g;
// What the pattern above does not read: a bare `*` or `:`, regexp groups, quoted or escaped names.
const UNREADABLE = /[:*](?![A-Za-z_$])|[()"\\]/;

// Optional: a `{...}` group (path-to-regexp v8) and a name ending in `?` or `*` (Express 4).
const OPTIONAL_GROUP = /\{[^{}]*\}/g;
const OPTIONAL_PARAM = /[:*][A-Za-z_$][\w$]*[?*]/g;

/** The parameters one path always gives, or `undefined` when the path cannot be read so. */
function requiredParamsOf(path: unknown): string[] | undefined {
  if (typeof path !== 'string' || UNREADABLE.test(path)) return undefined;
  let required = path;
  // Groups nest (`{/:page{/:size}}`): the innermost go first, until none is left.
  for (let before = ''; before !== required;) {
    before = required;
    required = required.replace(OPTIONAL_GROUP, '');
  }
  required = required.replace(OPTIONAL_PARAM, '');
  return [...required.matchAll(NAMED_PARAM)].map(([, name]) => name);
}

/**
 * The route parameters every route of a handler gives (each controller path with each method
 * path; optional segments give none), or `undefined` when it is no route or a path cannot be
 * read. A global prefix or a `RouterModule` path may add parameters these do not show.
 */
export function paramsOfEveryRoute(controller: object, handler: object): Set<string> | undefined {
  const handlerPaths: unknown = Reflect.getMetadata(PATH_METADATA, handler);
  if (handlerPaths === undefined) return undefined;
  const controllerPaths: unknown = Reflect.getMetadata(PATH_METADATA, controller);
  const list = (paths: unknown) => (Array.isArray(paths) ? (paths as unknown[]) : [paths ?? '/']);
  let every: Set<string> | undefined;
  for (const controllerPath of list(controllerPaths)) {
    for (const handlerPath of list(handlerPaths)) {
      const fromController = requiredParamsOf(controllerPath);
      const fromHandler = requiredParamsOf(handlerPath);
      if (!fromController || !fromHandler) return undefined;
      const route = new Set([...fromController, ...fromHandler]);
      every = every ? new Set([...every].filter((name) => route.has(name))) : route;
    }
  }
  return every;
}
