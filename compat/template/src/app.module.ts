import { Module } from '@nestjs/common';
import { MongoLockModule } from 'nestjs-mongo-lock';
import { ItemsController } from './items.controller.js';
import { LedgerService } from './ledger.service.js';
import { lockModuleOptions } from './lock-config.js';

@Module({
  imports: [MongoLockModule.forRootAsync(lockModuleOptions)],
  controllers: [ItemsController],
  providers: [LedgerService],
})
export class AppModule {}
