import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { MongoLockModuleOptions } from './interfaces/mongo-lock-options.interface';

export const {
  ConfigurableModuleClass: MongoLockConfigurableModule,
  MODULE_OPTIONS_TOKEN: MONGO_LOCK_OPTIONS,
  OPTIONS_TYPE: MONGO_LOCK_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: MONGO_LOCK_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<MongoLockModuleOptions>({ moduleName: 'MongoLock' })
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: false }, (definition, extras) => ({
    ...definition,
    global: extras.isGlobal,
  }))
  .build();
