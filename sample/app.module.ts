import { Logger, Module, type OnApplicationShutdown } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { MongoLockModule } from '../lib';
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
    ScheduleModule.forRoot(),
  ],
  controllers: [OrdersController, LocksController],
  providers: [OrdersService, DigestJob],
})
export class AppModule implements OnApplicationShutdown {
  // Runs after the lock module's own shutdown (modules shut down importer last).
  onApplicationShutdown(signal?: string): void {
    new Logger('Sample').log(`Stopped${signal ? ` on ${signal}` : ''}: locks released`);
  }
}
