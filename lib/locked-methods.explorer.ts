import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper.js';
import { bindLockService } from './decorators/lock-bindings';
import { getLockedMetadata } from './decorators/locked-metadata';
import { LockService } from './lock.service';
import { MESSAGES } from './mongo-lock.messages';

/**
 * Binds every singleton provider that has `@Locked` methods to this application's
 * LockService, when the module initialises. Binding instances (not classes) lets two
 * applications in one process lock with their own services.
 */
@Injectable()
export class LockedMethodsExplorer implements OnModuleInit {
  private readonly logger = new Logger('MongoLockModule');

  constructor(
    private readonly discoveryService: DiscoveryService,
    private readonly metadataScanner: MetadataScanner,
    private readonly lockService: LockService,
  ) {}

  onModuleInit(): void {
    for (const wrapper of this.discoveryService.getProviders()) this.bindProvider(wrapper);
  }

  private bindProvider(wrapper: InstanceWrapper): void {
    const instance: unknown = wrapper.instance;
    // Aliases (useExisting) point at an instance that is visited under its own token.
    if (wrapper.isAlias || typeof instance !== 'object' || instance === null) return;
    const prototype: unknown = Object.getPrototypeOf(instance);
    if (!prototype) return;
    const lockedMethods = this.metadataScanner
      .getAllMethodNames(prototype)
      .filter((name) => getLockedMetadata((instance as Record<string, unknown>)[name]));
    if (lockedMethods.length === 0) return;
    if (!wrapper.isDependencyTreeStatic()) {
      for (const method of lockedMethods) {
        this.logger.warn(MESSAGES.requestScopedProvider(String(wrapper.name), method));
      }
      return;
    }
    // A transient provider has one instance per consumer besides the static one.
    const transients = wrapper.isTransient
      ? wrapper.getStaticTransientInstances().map((perContext) => perContext?.instance as unknown)
      : [];
    for (const each of [instance, ...transients]) {
      if (typeof each !== 'object' || each === null) continue;
      if (!bindLockService(each, this.lockService)) {
        this.logger.warn(MESSAGES.sharedInstance(String(wrapper.name)));
      }
    }
  }
}
