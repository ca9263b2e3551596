import { Logger, Module, type OnApplicationShutdown } from '@nestjs/common';
import { MongoLockModule } from '../lib';
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
      }),
    }),
  ],
  controllers: [OrdersController, LocksController],
  providers: [OrdersService],
})
export class AppModule implements OnApplicationShutdown {
  // Runs after the lock module's own shutdown (modules shut down importer last).
  onApplicationShutdown(signal?: string): void {
    new Logger('Sample').log(`Stopped${signal ? ` on ${signal}` : ''}: locks released`);
  }
}
