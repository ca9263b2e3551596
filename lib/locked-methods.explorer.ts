import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleInit,
} from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper.js';
import { bindLockService } from './decorators/lock-bindings';
import { decoratedMethods } from './decorators/decorated-methods';
import { getLockedMetadata, type LockedMetadata } from './decorators/locked-metadata';
import { getOnlyLeaderMetadata, type OnlyLeaderMetadata } from './decorators/only-leader.decorator';
import { hasDocumentLocks } from './documents/document-locks-registry';
import { InvalidLockKeyError } from './errors/invalid-lock-key.error';
import { InvalidLockOptionsError } from './errors/invalid-lock-options.error';
import { MongoLockError } from './errors/mongo-lock.error';
import type { MongoLockModuleOptions } from './interfaces/mongo-lock-options.interface';
import { httpOnlyPlaceholders } from './keys/key-template';
import { LockService } from './lock.service';
import { MONGO_LOCK_OPTIONS } from './mongo-lock.module-definition';
import { MESSAGES } from './mongo-lock.messages';

/**
 * Method metadata of providers whose methods Nest itself calls as handlers, through
 * interceptors, and whose result it awaits whatever it is: `@SubscribeMessage` of
 * @nestjs/websockets and the resolver decorators of @nestjs/graphql. These may stay synchronous.
 */
const FRAMEWORK_HANDLER_METADATA = ['websockets:message_mapping', 'graphql:resolver_type'];

function isFrameworkHandler(method: unknown): boolean {
  return (
    typeof method === 'function' &&
    FRAMEWORK_HANDLER_METADATA.some((key) => Reflect.getMetadata(key, method) !== undefined)
  );
}

/**
 * Binds every singleton provider that has `@Locked` or `@OnlyLeader` methods to this
 * application's LockService, when the module initialises, and stands for every `@OnlyLeader`
 * name from bootstrap (the service resigns them first at shutdown). Binding instances (not
 * classes) lets two applications in one process lock with their own services.
 */
@Injectable()
export class LockedMethodsExplorer implements OnModuleInit, OnApplicationBootstrap {
  private readonly logger = new Logger('MongoLockModule');
  /** The `@OnlyLeader` names of bound providers, campaigned for from bootstrap. */
  private readonly leaderNames = new Map<string, OnlyLeaderMetadata>();

  constructor(
    private readonly discoveryService: DiscoveryService,
    private readonly lockService: LockService,
    @Inject(MONGO_LOCK_OPTIONS) private readonly options: MongoLockModuleOptions,
  ) {}

  onModuleInit(): void {
    // A controller may also be listed as a provider (to inject it elsewhere): its handlers
    // are still routes, with a request to read.
    const controllers = new Set(this.discoveryService.getControllers().map((w) => w.metatype));
    for (const wrapper of this.discoveryService.getProviders()) {
      this.bindProvider(wrapper, controllers.has(wrapper.metatype));
    }
    for (const wrapper of [
      ...this.discoveryService.getProviders(),
      ...this.discoveryService.getControllers(),
    ]) {
      this.checkDocumentNames(wrapper);
    }
    for (const wrapper of this.discoveryService.getControllers()) {
      this.refuseLeaderRoutes(wrapper);
      this.warnUnlockedOverrides(wrapper);
    }
    // Created once every method is known, with the one ttlMs they ask.
    for (const { name, options } of this.leaderNames.values()) {
      this.lockService.leadership(name, options);
    }
  }

  /** Campaigns for every `@OnlyLeader` name until shutdown (`terms$` completes then). */
  onApplicationBootstrap(): void {
    if (this.options.enabled === false) return;
    for (const { name, options } of this.leaderNames.values()) {
      this.lockService.leadership(name, options).terms$.subscribe();
    }
  }

  /**
   * `@LockedDocument` names a collection that `forFeature()` registered with this application's
   * service; an unknown name fails the start-up rather than every call.
   */
  private checkDocumentNames(wrapper: InstanceWrapper): void {
    const instance: unknown = wrapper.instance;
    if (wrapper.isAlias || typeof instance !== 'object' || instance === null) return;
    const prototype: unknown = Object.getPrototypeOf(instance);
    if (!prototype) return;
    for (const metadata of [...decoratedMethods(prototype, getLockedMetadata).values()].flat()) {
      if (metadata.document && !hasDocumentLocks(this.lockService, metadata.document.name)) {
        throw new InvalidLockOptionsError(
          `@LockedDocument on ${metadata.where} names ${JSON.stringify(metadata.document.name)}, which no MongoLockModule.forFeature() of this application registered`,
          { option: 'name' },
        );
      }
    }
  }

  private bindProvider(wrapper: InstanceWrapper, isController: boolean): void {
    const instance: unknown = wrapper.instance;
    // Aliases (useExisting) point at an instance that is visited under its own token.
    if (wrapper.isAlias || typeof instance !== 'object' || instance === null) return;
    const prototype: unknown = Object.getPrototypeOf(instance);
    if (!prototype) return;
    const method = (name: PropertyKey) => (instance as Record<PropertyKey, unknown>)[name];
    const locked = decoratedMethods(prototype, getLockedMetadata);
    const leaders = isController
      ? new Map<PropertyKey, OnlyLeaderMetadata[]>()
      : decoratedMethods(prototype, getOnlyLeaderMetadata);
    if (locked.size === 0 && leaders.size === 0) return;
    // The methods calls reach: an ancestor's body behind an undecorated override runs only
    // through super, if at all.
    for (const name of isController ? [] : locked.keys()) {
      this.refuseSynchronous(method(name));
      this.refuseHttpPlaceholders(method(name));
    }
    if (!wrapper.isDependencyTreeStatic()) {
      for (const name of [...locked.keys(), ...leaders.keys()]) {
        this.logger.warn(MESSAGES.requestScopedProvider(String(wrapper.name), String(name)));
      }
      return;
    }
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

  /** A route is called by requests, which any instance serves: `@OnlyLeader` belongs on providers. */
  private refuseLeaderRoutes(wrapper: InstanceWrapper): void {
    const prototype: unknown = (wrapper.metatype as { prototype?: unknown } | null)?.prototype;
    if (typeof prototype !== 'object' || prototype === null) return;
    for (const [metadata] of decoratedMethods(prototype, getOnlyLeaderMetadata).values()) {
      throw new MongoLockError(
        `@OnlyLeader on ${metadata.where}: a controller's handler serves requests on every instance; put it on a provider method the handler calls`,
      );
    }
  }

  /**
   * A controller's route that overrides a `@Locked` handler without `@Locked` has no lock of
   * its own: through `super`, the ancestor's body runs unlocked (a direct call on a controller
   * runs as is).
   */
  private warnUnlockedOverrides(wrapper: InstanceWrapper): void {
    const prototype: unknown = (wrapper.metatype as { prototype?: unknown } | null)?.prototype;
    if (typeof prototype !== 'object' || prototype === null) return;
    for (const [name, [nearest]] of decoratedMethods(prototype, getLockedMetadata)) {
      const own = getLockedMetadata((prototype as Record<PropertyKey, unknown>)[name]);
      if (own !== nearest) {
        this.logger.warn(
          MESSAGES.unlockedOverride(`${String(wrapper.name)}.${String(name)}`, nearest.where),
        );
      }
    }
  }

  /** One ttlMs per name across the application (a method may leave it out); a conflict fails the start-up. */
  private standFor(metadata: OnlyLeaderMetadata): void {
    const known = this.leaderNames.get(metadata.name);
    const ttlMs = metadata.options.ttlMs;
    if (
      known?.options.ttlMs !== undefined &&
      ttlMs !== undefined &&
      ttlMs !== known.options.ttlMs
    ) {
      throw new InvalidLockOptionsError(
        `@OnlyLeader(${JSON.stringify(metadata.name)}) on ${metadata.where} and ${known.where} asks different ttlMs`,
        { option: 'ttlMs' },
      );
    }
    if (!known || known.options.ttlMs === undefined) this.leaderNames.set(metadata.name, metadata);
  }

  /**
   * A provider method called directly has its arguments, not a request: a template that reads
   * `{params.id}` (or query, body, user, headers) would fail on every call, so the start-up
   * fails instead. Handlers that Nest calls through interceptors (gateways, resolvers) are left
   * to their interceptor, which may fill those values.
   */
  private refuseHttpPlaceholders(method: unknown): void {
    const metadata: LockedMetadata | undefined = getLockedMetadata(method);
    if (!metadata || isFrameworkHandler(method)) return;
    const [first] = httpOnlyPlaceholders(metadata.templates ?? []);
    if (first) {
      throw new InvalidLockKeyError(
        MESSAGES.httpPlaceholderInProvider(metadata.where, first.template, first.placeholder),
      );
    }
  }

  /**
   * A provider method called directly must return something awaitable: a lock is awaited, so
   * `@Locked` turns its result into a Promise. A synchronous one fails the start-up.
   */
  private refuseSynchronous(method: unknown): void {
    const metadata: LockedMetadata | undefined = getLockedMetadata(method);
    if (metadata?.returns === 'value' && !isFrameworkHandler(method)) {
      throw new MongoLockError(MESSAGES.syncMethod(metadata.where));
    }
  }
}
