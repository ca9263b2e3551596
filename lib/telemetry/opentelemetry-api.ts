/** The `@opentelemetry/api` module, as a type only: loading it is optional. @internal */
export type OpenTelemetryApi = typeof import('@opentelemetry/api');

/** Loads `@opentelemetry/api`; throws as `require` does when it is absent. @internal */
export type OpenTelemetryLoader = () => OpenTelemetryApi;

const requireOpenTelemetry: OpenTelemetryLoader = () =>
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  require('@opentelemetry/api') as OpenTelemetryApi;

/**
 * `@opentelemetry/api` if the application has it installed, else `undefined` (telemetry is
 * then off). Only a missing package is tolerated: a broken one fails loudly. @internal
 */
export function loadOpenTelemetryApi(
  load: OpenTelemetryLoader = requireOpenTelemetry,
): OpenTelemetryApi | undefined {
  try {
    return load();
  } catch (error) {
    if (isModuleNotFound(error)) return undefined;
    throw error;
  }
}

function isModuleNotFound(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND';
}
