// D9: "a document deleted and created again still gets larger fences" (docs/document-locks.md)
// fails when joins outran the clock (more than one per ms on a hot document: on v2 every waiting
// join takes a number). The offline server runs in this process and reads `Date`: a clock slowed
// for a moment stands in for a server that answers joins faster than one per ms.
import { scratchSuite } from './helpers';

jest.setTimeout(30_000);

const RealDate = Date;
let rate = 1;
let base = RealDate.now();
let virtualBase = base;
const virtualNow = () => virtualBase + (RealDate.now() - base) * rate;
function setRate(next: number) {
  virtualBase = virtualNow();
  base = RealDate.now();
  rate = next;
}
class SlowDate extends RealDate {
  constructor(...args: unknown[]) {
    if (args.length === 0) super(virtualNow());
    else super(...(args as [number]));
  }
  static override now() {
    return virtualNow();
  }
  static override [Symbol.hasInstance](value: unknown) {
    return value instanceof RealDate;
  }
}

describe('D9 fences of a document deleted and made again', () => {
  const { state, service } = scratchSuite();
  beforeAll(() => {
    (globalThis as { Date: DateConstructor }).Date = SlowDate as unknown as DateConstructor;
  });
  afterAll(() => {
    (globalThis as { Date: DateConstructor }).Date = RealDate;
  });
  afterEach(() => setRate(1));

  it.each(['v2', 'v1'] as const)('%s: stay above every fence handed out before', async (engine) => {
    const docs = (await service({ engine })).documents(state.name);
    setRate(0.001); // a burst: 200 joins within a fraction of a ms of the server's clock
    let last = 0n;
    for (let i = 0; i < 200; i += 1) {
      const lock = await docs.tryAcquire('a');
      last = lock!.fence;
      await lock!.release();
    }
    setRate(1);
    await state.docs.deleteOne({ _id: 'a' as never });
    await state.docs.insertOne({ _id: 'a', n: 0 } as never);
    const next = await docs.acquire('a');
    await next.release();
    // Observed: smaller (the fence number restarts at the clock, which the burst had outrun).
    expect(next.fence).toBeGreaterThan(last);
  });
});
