import { Controller, Get, type MessageEvent, Param, Sse } from '@nestjs/common';
import { map, type Observable } from 'rxjs';
import { LockService } from '../../lib';

/** Lock diagnostics: a live feed of acquisitions and releases, and one key's state. */
@Controller('locks')
export class LocksController {
  constructor(private readonly locks: LockService) {}

  /** Server-sent events, one per acquisition or release on the lock collection. */
  @Sse('events')
  events(): Observable<MessageEvent> {
    return this.locks.events$.pipe(
      map((event) => ({ data: { ...event, fence: event.fence?.toString() ?? null } })),
    );
  }

  @Get(':key')
  async status(@Param('key') key: string) {
    const state = await this.locks.inspect(key);
    if (!state) return { key, held: false, known: false };
    // Fences are bigints, which JSON cannot carry: sent as strings.
    const holders = state.holders.map((holder) => ({ ...holder, fence: holder.fence.toString() }));
    return { ...state, fence: state.fence.toString(), holders, known: true };
  }
}
