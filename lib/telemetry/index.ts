import { NOOP_LOCK_TELEMETRY, type LockTelemetry } from './lock-telemetry';
import { loadOpenTelemetryApi, type OpenTelemetryLoader } from './opentelemetry-api';
import { OpenTelemetryLockTelemetry } from './opentelemetry-lock-telemetry';

export type { LockTelemetry } from './lock-telemetry';
export { NOOP_LOCK_TELEMETRY } from './lock-telemetry';

/** OpenTelemetry if `@opentelemetry/api` is installed, else a no-op. `load`: tests. @internal */
export function createLockTelemetry(load?: OpenTelemetryLoader): LockTelemetry {
  const api = loadOpenTelemetryApi(load);
  return api ? new OpenTelemetryLockTelemetry(api) : NOOP_LOCK_TELEMETRY;
}
