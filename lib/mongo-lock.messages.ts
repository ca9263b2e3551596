// Messages of the Nest-facing layer, as functions so that wording lives in one place.

// `quote` shortens: a template or key quoted in a message cannot flood a log line.
import { quoteLockKey as quote } from './keys/lock-key';

export const MESSAGES = {
  templateEmpty: () => 'Lock key template must be a non-empty string',
  templateUnmatchedBrace: (template: string, index: number) =>
    `Lock key template ${quote(template)} has an unmatched brace at ${index} (write {{ or }} for a literal brace)`,
  templateUnknownSource: (template: string, placeholder: string, sources: readonly string[]) =>
    `Lock key template ${quote(template)}: {${placeholder}} must start with one of ${sources.join(', ')}`,
  templateWholeSource: (template: string, placeholder: string) =>
    `Lock key template ${quote(template)}: {${placeholder}} names a whole source; name a field, e.g. {${placeholder}.id}`,
  templateBadSegment: (template: string, placeholder: string, segment: string) =>
    `Lock key template ${quote(template)}: {${placeholder}} has an invalid path segment ${quote(segment)} (letters, digits, _, $ and - only)`,
  templateForbiddenSegment: (template: string, placeholder: string, segment: string) =>
    `Lock key template ${quote(template)}: {${placeholder}} may not use ${quote(segment)}`,
  templateBadArgumentIndex: (template: string, placeholder: string) =>
    `Lock key template ${quote(template)}: {${placeholder}} must start with an argument index, e.g. {args.0.id}`,
  templateValueMissing: (template: string, placeholder: string, contextType: string) =>
    `Lock key template ${quote(template)}: ${placeholder} has no value in this ${contextType} call`,
  routeParamMissing: (missing: string) =>
    `${missing}: route parameters come from the route's path, so the template names one the ` +
    'route does not have (or leaves optional); fix the template or the route',
  templateValueNotScalar: (template: string, placeholder: string, kind: string) =>
    `Lock key template ${quote(template)}: ${placeholder} is ${kind}; it must be a non-empty string, a finite number, a bigint, a boolean or an ObjectId`,
  templateUnseparated: (template: string, first: string, second: string) =>
    `Lock key template ${quote(template)}: ${first} and ${second} must be separated by a character ` +
    'other than a letter, a digit or % (for example ":"), or different values could build the same key',
  templateNeverValid: (template: string) =>
    `Lock key template ${quote(template)} can never give a valid key, whatever its values`,
  templateInvalidKey: (template: string) =>
    `Lock key template ${quote(template)} gave an invalid key`,
  transactionUnsubscribed: (where: string) =>
    `${where} was unsubscribed before it completed: its transaction was aborted, not committed`,
  documentIdPlaceholders: (where: string) =>
    `@LockedDocument on ${where}: an id template may hold one placeholder (the id is the ` +
    "document's _id as rendered, so two values could name another's document); compose ids " +
    'in an id function instead',
  keyFunctionInvalidKey: (where: string) => `The lock key function of ${where} gave an invalid key`,
  keyFunctionBadResult: (where: string) =>
    `The lock key function of ${where} must return a non-empty string or a non-empty array of them`,
  noKeys: (where: string) => `@Locked on ${where} needs at least one key template`,
  lockedTwice: (where: string) =>
    `@Locked is applied twice to ${where}; give both keys to one @Locked([...])`,
  twoLockDecorators: (where: string) =>
    `${where} has both @Locked and @LockedDocument; a method takes one of them`,
  notAMethod: (where: string, decorator: string) =>
    `${decorator} can only decorate a method; ${where} is not one`,
  moduleOptionsMissing: (method: 'forRoot' | 'forRootAsync') =>
    method === 'forRoot'
      ? 'MongoLockModule.forRoot() needs an options object: { uri } or { client }'
      : 'MongoLockModule.forRootAsync() needs one of useFactory, useClass or useExisting',
  moduleOptionsTwice:
    'MongoLockModule.forRootAsync() takes one of useFactory, useClass or useExisting, not several',
  moduleImportedTwice: (count: number) =>
    `MongoLockModule.forRoot() is imported ${count} times in this application (forRootAsync() ` +
    'and MongoLockTestingModule.forRoot() count too): each import has its own LockService, so ' +
    'routes and @Locked methods would lock through different services, and a nested call on a ' +
    'key its caller holds would wait for that caller. Import it once, with isGlobal: true, in ' +
    'the root module: every module can then inject LockService and use @Locked without ' +
    'importing it (MongoLockModule.forFeature() registers document locks, not a LockService)',
  staticMethod: (where: string, decorator: string) =>
    `${decorator} on ${where}: not an instance method (a static method belongs to no provider)`,
  asyncGenerator: (where: string, decorator: string) =>
    `${decorator} on ${where}: async generator methods (async *) are not supported, as the lock ` +
    'would end when the generator is returned, before its body runs. Lock inside it ' +
    '(LockService.withLock around the work), or return an Observable',
  decoratorReplaced: (where: string, decorator: string) =>
    `${decorator} on ${where} was replaced by a decorator applied after it (written above it) ` +
    `that did not copy the method's metadata: the method would run without ${decorator}. Write ` +
    `${decorator} above that decorator, or have it copy the metadata (Reflect.getMetadataKeys)`,
  badOption: (where: string, option: string, accepted: string, decorator: string) =>
    `${decorator} on ${where}: option ${option} must be ${accepted}`,
  syncMethod: (where: string) =>
    `${where} is @Locked but is neither async nor declared to return a Promise or an Observable. ` +
    'Taking a lock means waiting, so the method would return a Promise that its callers do not ' +
    'expect (and an un-awaited failure would crash the process). Make it `async`, or declare ' +
    '`: Promise<T>` or `: Observable<T>` (with Observable imported as a value, not `import type`)',
  unawaitableResult: (where: string) =>
    `${where} is @Locked and returned a plain value: @Locked methods return a Promise, so make ` +
    'the method `async` (its callers must await it)',
  skippedBusy: (where: string, keys: readonly string[]) =>
    `${where} did not run: ${keys.length > 1 ? 'one of ' : ''}${keys.map((key) => quote(key)).join(', ')} is held elsewhere (onBusy: 'skip')`,
  minHoldNotKept: (where: string, key: string, error: unknown) =>
    `${where}: could not set the lease of ${quote(key)} to end minHoldMs after it was taken ` +
    `(${String(error)}); it is left to run out by itself`,
  httpPlaceholderInProvider: (where: string, template: string, placeholder: string) =>
    `${where} is a provider method, but its lock template ${quote(template)} uses ${placeholder}, ` +
    'which only an HTTP handler (a controller method) has, so every call would fail; a provider ' +
    "method's keys come from its arguments: {args.0}, {args.1.id}, ... (or use a key function)",
  calledBeforeInit: (where: string) =>
    `${where} is @Locked, but it was called before MongoLockModule initialised (from a ` +
    'constructor, or an onModuleInit that runs first), so it cannot be locked: ' +
    'call it from onApplicationBootstrap, or later',
  unboundInstance: (where: string) =>
    `${where} is @Locked, but this instance is not managed by an application that imports ` +
    'MongoLockModule (it was created with `new`, is request-scoped, was called before the ' +
    'application initialised, or was created after it: `app.resolve()` of a transient ' +
    'provider, a module loaded by LazyModuleLoader), so it cannot be locked',
  clientLeftWhileWaiting: (where: string) =>
    `${where} was not run: its client left while it waited for the lock`,
  handlerAfterRequestEnded: (where: string) =>
    `${where} was not run: its request ended (an interceptor stopped listening) before Nest ` +
    'called it, and the lock was released then',
  unlockedOverride: (method: string, ancestor: string) =>
    `${method} overrides ${ancestor}, which is @Locked, without @Locked: as a route it takes no ` +
    'lock, and through super the locked body is called outside its route (a key from the ' +
    'request fails it). Put @Locked on the override too',
  unknownRouteParam: (where: string, template: string, param: string, params: Iterable<string>) =>
    `${where} is @Locked with ${quote(template)}, but not every route of its paths has the ` +
    `parameter ${quote(param)} (every one has: ${[...params].join(', ') || 'none'}): unless a ` +
    'global prefix or a RouterModule path adds it, the requests without it will fail with a ' +
    'server error',
  calledOutsideRoute: (where: string, template: string, placeholder: string) =>
    `${where} is @Locked with ${quote(template)}, which reads ${placeholder} from the request, ` +
    'but it was called outside its route (by another method through `this`, by a scheduler, or ' +
    'by a decorator written above @Locked that wraps it), where there is no request: it was not ' +
    'run. Give such calls a method whose keys come from its arguments ({args.0}, ...), or write ' +
    '@Locked above the other decorator',
  requestScopedControllerOutsideRoute: (where: string) =>
    `${where} is @Locked on a request-scoped controller and was called outside its route (by ` +
    'another method through `this`, or by a decorator written above @Locked that wraps it): ' +
    'such an instance is made per request and cannot be locked there, so it was not run. Move ' +
    'the method to a singleton provider',
  requestScopedProvider: (name: string, method: string) =>
    `Cannot lock ${name}.${method}: ${name} is request-scoped (declared so, or it injects a ` +
    'request-scoped provider, such as REQUEST), and @Locked needs a static (singleton) ' +
    'provider, so calls to it will fail. Move the method to a singleton provider, or inject ' +
    'LockService and call withLock inside it',
  transientInRequestScope: (name: string, method: string) =>
    `Cannot lock ${name}.${method} where a request-scoped provider or controller injects it: ` +
    '@Locked needs a static (singleton) provider, and a transient one is made per request there; ' +
    'calls to those instances will fail',
  sharedInstance: (name: string) =>
    `"${name}" is shared by several applications; its @Locked methods use the first one's LockService`,
  serviceMissing: () =>
    'No LockService in this application: import MongoLockModule.forRoot() or forRootAsync()',
  serviceMissingAtStart: () =>
    '@Locked is used in this application, but no MongoLockModule is imported: every locked ' +
    'route and method call will fail. Import MongoLockModule.forRoot() or forRootAsync() (in ' +
    'tests, MongoLockTestingModule.forRoot())',
  observableWithoutType: (where: string) =>
    `${where} is @Locked and returned an Observable, but its declared return type is not ` +
    'Observable, so the lock was released before the Observable ran; declare `: Observable<T>` ' +
    '(with Observable imported as a value, not `import type`)',
  observableInPromise: (where: string) =>
    `${where} is @Locked and its Promise resolved to an Observable, so the lock was released ` +
    'before the Observable ran; return the Observable itself (not from an `async` method) and ' +
    'declare `: Observable<T>`',
  lockedAboveOnlyLeader: (where: string, decorator: string) =>
    `${decorator} on ${where} is written above @OnlyLeader: every instance would take the lock ` +
    'before @OnlyLeader skips the body, and keep the leader from taking it. Write @OnlyLeader ' +
    `above ${decorator}: only the leader then takes the lock`,
  iterableResult: (where: string) =>
    `${where} is @Locked and returned an async iterable (a MongoDB cursor, a stream): the lock ` +
    'is released before its caller reads it. Read it inside the method (cursor.toArray()), or ' +
    'return an Observable, which keeps the lock until it completes',
  observableExpected: (where: string) =>
    `${where} is declared to return an Observable but returned something else`,
  locked: (seconds: number | undefined) =>
    seconds === undefined
      ? 'The resource is locked; try again later'
      : `The resource is locked; try again in ${seconds} s`,
  unavailable: (seconds: number) => `The lock service is unavailable; try again in ${seconds} s`,
};
