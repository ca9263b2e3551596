import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleInit,
} from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { STATIC_CONTEXT } from '@nestjs/core/injector/constants.js';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper.js';
import { prototypeChain, replacedPlaces } from './decorators/decorated-places';
import {
  bindLockService,
  bindingSoon,
  markRequestScopedController,
} from './decorators/lock-bindings';
import { getLockedMetadata, type LockedMetadata } from './decorators/locked-metadata';
import { getOnlyLeaderMetadata, type OnlyLeaderMetadata } from './decorators/only-leader.decorator';
import { hasDocumentLocks } from './documents/document-locks-registry';
import { InvalidLockKeyError } from './errors/invalid-lock-key.error';
import { InvalidLockOptionsError } from './errors/invalid-lock-options.error';
import { MongoLockError } from './errors/mongo-lock.error';
import type { MongoLockModuleOptions } from './interfaces/mongo-lock-options.interface';
import { paramsOfEveryRoute } from './http/route-params';
import { httpOnlyPlaceholders, routeParamPlaceholders } from './keys/key-template';
import { LockService } from './lock.service';
import { MONGO_LOCK_OPTIONS } from './mongo-lock.module-definition';
import { MESSAGES } from './mongo-lock.messages';

/**
 * Decorated methods of a class and its ancestors, by name or symbol (Nest's `MetadataScanner`
 * lists names only), each with the metadata of every level that has it, nearest first: an
 * undecorated override calling `super` runs the ancestor's decorated body. Accessors are skipped.
 */
function decoratedMethods<T>(
  prototype: object,
  metadataOf: (method: unknown) => T | undefined,
): Map<PropertyKey, T[]> {
  const found = new Map<PropertyKey, T[]>();
  for (const level of prototypeChain(prototype)) {
    for (const key of Reflect.ownKeys(level)) {
      const value: unknown = Object.getOwnPropertyDescriptor(level, key)?.value;
      const metadata = typeof value === 'function' ? metadataOf(value) : undefined;
      if (metadata !== undefined) found.set(key, [...(found.get(key) ?? []), metadata]);
    }
  }
  return found;
}

/** The prototype of the instance Nest made for `wrapper`, if it is an object. */
function instancePrototype(wrapper: InstanceWrapper): object | undefined {
  const instance: unknown = wrapper.instance;
  // Aliases (useExisting) point at an instance that is visited under its own token.
  if (wrapper.isAlias || typeof instance !== 'object' || instance === null) return undefined;
  return (Object.getPrototypeOf(instance) as object | null) ?? undefined;
}

/**
 * Transient providers a consumer makes per request (a request-scoped consumer, or a transient one
 * made so): the instances made there are never bound, so their `@Locked` calls fail.
 */
function transientsMadePerRequest(wrappers: InstanceWrapper[]): Set<InstanceWrapper> {
  const hostsOf = new Map<InstanceWrapper, InstanceWrapper[]>();
  for (const host of wrappers) {
    const properties = (host.getPropertiesMetadata() ?? []).map((property) => property.wrapper);
    for (const dependency of [...(host.getCtorMetadata() ?? []), ...properties]) {
      if (!dependency?.isTransient) continue;
      hostsOf.set(dependency, [...(hostsOf.get(dependency) ?? []), host]);
    }
  }
  const madePerRequest = new Set<InstanceWrapper>();
  const visit = (wrapper: InstanceWrapper, seen: Set<InstanceWrapper>): boolean => {
    if (madePerRequest.has(wrapper)) return true;
    if (seen.has(wrapper)) return false;
    seen.add(wrapper);
    const perRequest = (hostsOf.get(wrapper) ?? []).some(
      (host) => !host.isDependencyTreeStatic() || (host.isTransient && visit(host, seen)),
    );
    if (perRequest) madePerRequest.add(wrapper);
    return perRequest;
  };
  for (const wrapper of hostsOf.keys()) visit(wrapper, new Set());
  return madePerRequest;
}

/**
 * Metadata of handlers Nest calls through interceptors and awaits whatever they return
 * (websockets' `@SubscribeMessage`, graphql resolvers): these may stay synchronous.
 */
const FRAMEWORK_HANDLER_METADATA = ['websockets:message_mapping', 'graphql:resolver_type'];

function isFrameworkHandler(method: unknown): boolean {
  return (
    typeof method === 'function' &&
    FRAMEWORK_HANDLER_METADATA.some((key) => Reflect.getMetadata(key, method) !== undefined)
  );
}

/**
 * At module init, binds singleton providers and controllers (for calls other than their routes')
 * with `@Locked` or `@OnlyLeader` methods to this application's LockService; from bootstrap,
 * campaigns for every `@OnlyLeader` name. Binding instances, not classes, lets two applications
 * in one process use their own services.
 */
@Injectable()
export class LockedMethodsExplorer implements OnModuleInit, OnApplicationBootstrap {
  private readonly logger = new Logger('MongoLockModule');
  private readonly leaderNames = new Map<string, OnlyLeaderMetadata>();
  private readonly initialised: () => void;

  constructor(
    private readonly discoveryService: DiscoveryService,
    private readonly lockService: LockService,
    @Inject(MONGO_LOCK_OPTIONS) private readonly options: MongoLockModuleOptions,
  ) {
    this.initialised = bindingSoon(this);
  }

  /**
   * Whether `instance` is a provider or controller of this application's (bound at init): made
   * (stored in its wrapper), or being made (its constructor runs before Nest stores it).
   */
  willBind(instance: object): boolean {
    return [
      ...this.discoveryService.getControllers(),
      ...this.discoveryService.getProviders(),
    ].some(
      (wrapper) =>
        wrapper.instance === instance ||
        (wrapper.metatype === instance.constructor &&
          !wrapper.getInstanceByContextId(STATIC_CONTEXT).isResolved),
    );
  }

  async onModuleInit(): Promise<void> {
    this.initialised();
    const providers = this.discoveryService.getProviders();
    try {
      this.explore(providers, this.discoveryService.getControllers());
    } catch (error) {
      // Nest runs no shutdown hook after a refused start-up: close what connected already.
      await this.closeServices(providers);
      throw error;
    }
  }

  private explore(providers: InstanceWrapper[], controllers: InstanceWrapper[]): void {
    this.refuseSecondModule(providers);
    // A controller also listed as a provider still has routes, with a request to read.
    const controllerTypes = new Set(controllers.map((w) => w.metatype));
    const madePerRequest = transientsMadePerRequest([...providers, ...controllers]);
    // Nest calls a route through LockedInterceptor; other calls (a scheduler's, `this.helper()`)
    // lock through the binding, as a provider method's do.
    const withRoutes = [
      ...providers.map((wrapper) => [wrapper, controllerTypes.has(wrapper.metatype)] as const),
      ...controllers.map((wrapper) => [wrapper, true] as const),
    ];
    for (const [wrapper, hasRoutes] of withRoutes) {
      const prototype = instancePrototype(wrapper);
      if (prototype) this.exploreInstances(wrapper, prototype, hasRoutes, madePerRequest);
    }
    for (const wrapper of controllers) this.checkRoutes(wrapper);
    // Created once every method is known, with the one ttlMs they ask.
    for (const { name, options } of this.leaderNames.values()) {
      this.lockService.leadership(name, options);
    }
  }

  /** Closes the LockServices of this application's lock modules (several when refused for that). */
  private async closeServices(providers: InstanceWrapper[]): Promise<void> {
    const services = providers
      .filter((wrapper) => wrapper.token === LockService && !wrapper.isAlias)
      .map((wrapper): unknown => wrapper.instance)
      .filter((instance) => instance instanceof LockService);
    await Promise.all(services.map((service) => service.close()));
  }

  /** Campaigns for every `@OnlyLeader` name until shutdown (`terms$` completes then). */
  onApplicationBootstrap(): void {
    if (this.options.enabled === false) return;
    for (const { name, options } of this.leaderNames.values()) {
      this.lockService.leadership(name, options).terms$.subscribe();
    }
  }

  /**
   * Several `forRoot` imports (Nest keeps each as its own module) each make a LockService: routes
   * would lock through one, provider methods through another, and a nested call (a handler
   * calling a `@Locked` method on the same key) would wait on its own caller. Refused.
   */
  private refuseSecondModule(providers: InstanceWrapper[]): void {
    const count = providers.filter(
      (wrapper) => wrapper.token === MONGO_LOCK_OPTIONS && !wrapper.isAlias,
    ).length;
    if (count > 1) throw new MongoLockError(MESSAGES.moduleImportedTwice(count));
  }

  /** Refuses the class's methods that cannot work, then binds the instances Nest made of it. */
  private exploreInstances(
    wrapper: InstanceWrapper,
    prototype: object,
    isController: boolean,
    madePerRequest: ReadonlySet<InstanceWrapper>,
  ): void {
    // A method of ours another decorator replaced is hidden: a route's would take no lock (Nest no
    // longer sees our interceptor), an `@OnlyLeader` name would never be campaigned for. A
    // provider's `@Locked` body still runs locked through the wrapper, so its instance is bound.
    const replaced = replacedPlaces(prototype);
    const hidden = replaced.find((place) => isController || place.decorator === '@OnlyLeader');
    if (hidden) {
      throw new MongoLockError(MESSAGES.decoratorReplaced(hidden.where, hidden.decorator));
    }
    const instance = wrapper.instance as Record<PropertyKey, unknown>;
    const locked = decoratedMethods(prototype, getLockedMetadata);
    // An unknown `@LockedDocument` name fails the start-up rather than every call.
    for (const { document, where } of [...locked.values()].flat()) {
      if (document && !hasDocumentLocks(this.lockService, document.name)) {
        throw new InvalidLockOptionsError(
          `@LockedDocument on ${where} names ${JSON.stringify(document.name)}, which no MongoLockModule.forFeature() of this application registered`,
          { option: 'name' },
        );
      }
    }
    const leaders = isController
      ? new Map<PropertyKey, OnlyLeaderMetadata[]>()
      : decoratedMethods(prototype, getOnlyLeaderMetadata);
    if (locked.size === 0 && leaders.size === 0 && replaced.length === 0) return;
    // Nearest methods only: an ancestor's body behind an override runs only through super.
    for (const name of isController ? [] : locked.keys()) this.refuseUnusable(instance[name]);
    const warn = (message: (name: string, method: string) => string) => {
      for (const name of [...locked.keys(), ...leaders.keys()]) {
        this.logger.warn(message(String(wrapper.name), String(name)));
      }
    };
    if (!wrapper.isDependencyTreeStatic()) {
      // Its routes lock through the interceptor; its other calls cannot be locked and fail.
      if (isController && wrapper.metatype) markRequestScopedController(wrapper.metatype);
      else warn(MESSAGES.requestScopedProvider);
      return;
    }
    // Its instances made for request-scoped consumers are not bound; the static ones are.
    if (madePerRequest.has(wrapper)) warn(MESSAGES.transientInRequestScope);
    for (const metadata of [...leaders.values()].flat()) this.standFor(metadata);
    // A transient provider has one instance per consumer besides the static one.
    const transients = wrapper.isTransient
      ? wrapper.getStaticTransientInstances().map((perContext) => perContext?.instance as unknown)
      : [];
    // Validated by LockService already (it is constructed first).
    const binding = { service: this.lockService, enabled: this.options.enabled !== false };
    for (const each of [instance, ...transients]) {
      if (typeof each !== 'object' || each === null) continue;
      if (!bindLockService(each, binding)) {
        this.logger.warn(MESSAGES.sharedInstance(String(wrapper.name)));
      }
    }
  }

  private checkRoutes(wrapper: InstanceWrapper): void {
    const controller = wrapper.metatype;
    const prototype: unknown = (controller as { prototype?: unknown } | null)?.prototype;
    if (!controller || typeof prototype !== 'object' || prototype === null) return;
    // Any instance serves a route's requests: `@OnlyLeader` belongs on providers.
    for (const [metadata] of decoratedMethods(prototype, getOnlyLeaderMetadata).values()) {
      throw new MongoLockError(
        `@OnlyLeader on ${metadata.where}: a controller's handler serves requests on every instance; put it on a provider method the handler calls`,
      );
    }
    // A route overriding a `@Locked` handler without `@Locked` takes no lock as a route.
    for (const [name, [nearest]] of decoratedMethods(prototype, getLockedMetadata)) {
      const method = (prototype as Record<PropertyKey, unknown>)[name];
      if (getLockedMetadata(method) !== nearest) {
        this.logger.warn(
          MESSAGES.unlockedOverride(`${String(wrapper.name)}.${String(name)}`, nearest.where),
        );
      } else this.checkRouteParams(controller, method as object, nearest);
    }
  }

  /**
   * A `{params.x}` one of its routes does not always give fails those requests. Warned, not
   * refused: a global prefix or a `RouterModule` path may add parameters the paths do not show.
   */
  private checkRouteParams(controller: object, handler: object, metadata: LockedMetadata): void {
    const names = paramsOfEveryRoute(controller, handler);
    if (!names) return;
    for (const { template, param } of routeParamPlaceholders(metadata.templates ?? [])) {
      if (!names.has(param)) {
        this.logger.warn(MESSAGES.unknownRouteParam(metadata.where, template, param, names));
      }
    }
  }

  /** One ttlMs per name across the application (a method may leave it out); a conflict throws. */
  private standFor(metadata: OnlyLeaderMetadata): void {
    const known = this.leaderNames.get(metadata.name);
    const ttlMs = metadata.options.ttlMs;
    if (known?.options.ttlMs === undefined) this.leaderNames.set(metadata.name, metadata);
    else if (ttlMs !== undefined && ttlMs !== known.options.ttlMs) {
      throw new InvalidLockOptionsError(
        `@OnlyLeader(${JSON.stringify(metadata.name)}) on ${metadata.where} and ${known.where} asks different ttlMs`,
        { option: 'ttlMs' },
      );
    }
  }

  /**
   * Fails start-up for a provider method `@Locked` cannot serve (framework handlers excepted: Nest
   * awaits them, and their interceptors may fill request values).
   */
  private refuseUnusable(method: unknown): void {
    const metadata = getLockedMetadata(method);
    if (!metadata || isFrameworkHandler(method)) return;
    // `@Locked` makes a provider method's result a Promise.
    if (metadata.returns === 'value') throw new MongoLockError(MESSAGES.syncMethod(metadata.where));
    // A provider method has arguments, not a request: `{params.id}` would fail every call.
    const [first] = httpOnlyPlaceholders(metadata.templates ?? []);
    if (first) {
      throw new InvalidLockKeyError(
        MESSAGES.httpPlaceholderInProvider(metadata.where, first.template, first.placeholder),
      );
    }
  }
}
