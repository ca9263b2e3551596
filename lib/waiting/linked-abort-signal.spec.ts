import { getEventListeners } from 'node:events';
import { linkAbortSignals, SharedSignalLinks } from './linked-abort-signal';

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

describe('SharedSignalLinks', () => {
  it('gives the calls under way with one caller signal one linked signal', () => {
    const closing = new AbortController();
    const links = new SharedSignalLinks(closing.signal);
    const caller = new AbortController();
    const first = links.link(caller.signal);
    const second = links.link(caller.signal);
    expect(second.signal).toBe(first.signal);
    expect(getEventListeners(closing.signal, 'abort')).toHaveLength(1);
    expect(links.link(new AbortController().signal).signal).not.toBe(first.signal);
  });

  it('aborts every call of a caller signal with its reason, or with the base signal', () => {
    const closing = new AbortController();
    const links = new SharedSignalLinks(closing.signal);
    const caller = new AbortController();
    const other = links.link(new AbortController().signal);
    const linked = links.link(caller.signal);
    caller.abort('caller gave up');
    expect(linked.signal.reason).toBe('caller gave up');
    expect(other.signal.aborted).toBe(false);
    closing.abort('closing');
    expect(other.signal.reason).toBe('closing');
  });

  it('stops following its sources once the last call unlinks, each call counted once', () => {
    const closing = new AbortController();
    const links = new SharedSignalLinks(closing.signal);
    const caller = new AbortController();
    const first = links.link(caller.signal);
    const second = links.link(caller.signal);
    first.unlink();
    first.unlink();
    expect(links.size).toBe(1);
    expect(getEventListeners(caller.signal, 'abort')).toHaveLength(1);
    second.unlink();
    expect(links.size).toBe(0);
    expect(getEventListeners(caller.signal, 'abort')).toHaveLength(0);
    expect(getEventListeners(closing.signal, 'abort')).toHaveLength(0);
    // A later call links again, and follows its caller.
    const later = links.link(caller.signal);
    caller.abort('later');
    expect(later.signal.reason).toBe('later');
  });

  it('uses the base signal itself for a call without a signal of its own', () => {
    const closing = new AbortController();
    const links = new SharedSignalLinks(closing.signal);
    expect(links.link(undefined).signal).toBe(closing.signal);
    expect(links.size).toBe(0);
  });
});
