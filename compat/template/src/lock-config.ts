import { Injectable } from '@nestjs/common';
import type {
  MongoLockModuleAsyncOptions,
  MongoLockModuleOptions,
  MongoLockOptionsFactory,
} from 'nestjs-mongo-lock';

/** Options from the environment the compatibility job sets, through `forRootAsync({ useClass })`. */
@Injectable()
export class LockConfig implements MongoLockOptionsFactory {
  createMongoLockOptions(): MongoLockModuleOptions {
    const uri = process.env.MONGODB_URI;
    if (!uri) throw new Error('MONGODB_URI is not set');
    return { uri, dbName: process.env.COMPAT_DB ?? 'compat', defaultTtlMs: 10_000 };
  }
}

export const lockModuleOptions: MongoLockModuleAsyncOptions = {
  isGlobal: true,
  useClass: LockConfig,
};
