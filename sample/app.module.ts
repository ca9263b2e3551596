import { Logger, Module, type OnApplicationShutdown } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { MongoLockModule } from '../lib';
import { MongoLockBoardModule } from '../lib/board';
import { AccountsController } from './accounts/accounts.controller';
import { DigestJob } from './jobs/digest.job';
import { LocksController } from './locks/locks.controller';
import { OrdersController } from './orders/orders.controller';
import { OrdersService } from './orders/orders.service';

@Module({
  imports: [
    // forRootAsync, as an application that reads its configuration at start-up would.
    MongoLockModule.forRootAsync({
      isGlobal: true,
      useFactory: () => ({
        uri: process.env.MONGODB_URI,
        dbName: process.env.MONGODB_DB ?? 'sample',
        defaultTtlMs: 10_000,
        // SAMPLE_LOCKS=off: @Locked handlers and jobs run without any lock.
        enabled: process.env.SAMPLE_LOCKS !== 'off',
      }),
    }),
    // Locks on the documents of `accounts` themselves, versioned by their `version` field.
    MongoLockModule.forFeature([
      { name: 'accounts', collection: 'accounts', version: { field: 'version' } },
    ]),
    ScheduleModule.forRoot(),
    // The lock board, read-only, at /board (no release route; put a guard on it in production).
    MongoLockBoardModule.forRoot({ path: 'board' }),
  ],
  controllers: [OrdersController, LocksController, AccountsController],
  providers: [OrdersService, DigestJob],
})
export class AppModule implements OnApplicationShutdown {
  // Runs after the lock module's own shutdown (modules shut down importer last).
  onApplicationShutdown(signal?: string): void {
    new Logger('Sample').log(`Stopped${signal ? ` on ${signal}` : ''}: locks released`);
  }
}
