import { EMPTY } from 'rxjs';
import { createLockTelemetry, NOOP_LOCK_TELEMETRY } from '.';
import { loadOpenTelemetryApi } from './opentelemetry-api';
import { OpenTelemetryLockTelemetry } from './opentelemetry-lock-telemetry';

const notFound = () => {
  throw Object.assign(new Error("Cannot find module '@opentelemetry/api'"), {
    code: 'MODULE_NOT_FOUND',
  });
};

describe('telemetry loading', () => {
  it('is a no-op when @opentelemetry/api is not installed', () => {
    expect(loadOpenTelemetryApi(notFound)).toBeUndefined();
    expect(createLockTelemetry(notFound)).toBe(NOOP_LOCK_TELEMETRY);
  });

  it('uses OpenTelemetry when it is installed', () => {
    expect(createLockTelemetry()).toBeInstanceOf(OpenTelemetryLockTelemetry);
  });

  it('fails loudly on a broken install rather than hiding it', () => {
    const broken = () => {
      throw new SyntaxError('Unexpected token');
    };
    expect(() => createLockTelemetry(broken)).toThrow(SyntaxError);
  });

  it('passes results and errors through unchanged when off', async () => {
    const handle = { lost$: EMPTY, lost: false };
    await expect(
      NOOP_LOCK_TELEMETRY.acquisition('x', 1, 0, () => Promise.resolve(handle)),
    ).resolves.toBe(handle);
    const failure = new RangeError('no');
    await expect(
      NOOP_LOCK_TELEMETRY.lockedMethod('x', 'A.b', () => Promise.reject(failure)),
    ).rejects.toBe(failure);
    expect(
      NOOP_LOCK_TELEMETRY.observeLoad(() => ({ waiters: 0, held: 0, leading: new Map() }))(),
    ).toBeUndefined();
  });
});
