import { linkAbortSignals } from './linked-abort-signal';

describe('linkAbortSignals', () => {
  it('aborts with the reason of the first source that aborts', () => {
    const a = new AbortController();
    const b = new AbortController();
    const linked = linkAbortSignals([a.signal, undefined, b.signal]);
    expect(linked.signal.aborted).toBe(false);
    b.abort('b went first');
    a.abort('too late');
    expect(linked.signal.reason).toBe('b went first');
  });

  it('starts aborted when a source already is', () => {
    const a = new AbortController();
    a.abort('early');
    expect(linkAbortSignals([a.signal]).signal.reason).toBe('early');
  });

  it('no longer follows its sources once unlinked', () => {
    const a = new AbortController();
    const linked = linkAbortSignals([a.signal]);
    linked.unlink();
    a.abort('ignored');
    expect(linked.signal.aborted).toBe(false);
  });
});
