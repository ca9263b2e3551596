import { Injectable } from '@nestjs/common';
import type { INestApplicationContext } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
// Observable imported as a value: the declared return type is emitted as metadata.
import { firstValueFrom, interval, Observable, startWith, tap } from 'rxjs';
import { Locked, LockService } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { lockModule, startAppContext } from './support/nest-apps';

jest.setTimeout(60_000);

@Injectable()
class Watcher {
  static ticks = 0;

  /** First value synchronously (startWith), then one every 20 ms, with a side effect each. */
  @Locked('watch:{args.0}')
  watch(_name: string): Observable<number> {
    return interval(20).pipe(
      startWith(-1),
      tap(() => Watcher.ticks++),
    );
  }
}

describe('@Locked provider Observable left after a synchronous first value', () => {
  let mongo: TestMongo;
  let app: INestApplicationContext;

  beforeAll(async () => {
    mongo = await startTestMongo();
    app = await startAppContext({ imports: [lockModule(mongo)], providers: [Watcher] });
  });
  afterAll(async () => {
    await app?.close();
    await mongo?.stop();
  });

  it('stops the source when the caller leaves (firstValueFrom), as the lock is released', async () => {
    expect(await firstValueFrom(app.get(Watcher).watch('w1'))).toBe(-1);
    // The lock is given back on unsubscription...
    await sleep(100);
    expect((await app.get(LockService).inspect('watch:w1'))?.held).toBe(false);
    // ...so the source must have stopped too: no tick after the lock is free.
    const after = Watcher.ticks;
    await sleep(200);
    expect(Watcher.ticks).toBe(after);
  });
});
