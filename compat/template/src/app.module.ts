import { Module } from '@nestjs/common';
import { MongoLockModule } from 'nestjs-mongo-lock';
import { ItemsController } from './items.controller.js';
import { LedgerService } from './ledger.service.js';
import { lockModuleOptions } from './lock-config.js';
import { PeersModule } from './peers.js';

@Module({
  imports: [MongoLockModule.forRootAsync(lockModuleOptions), PeersModule],
  controllers: [ItemsController],
  providers: [LedgerService],
})
export class AppModule {}
