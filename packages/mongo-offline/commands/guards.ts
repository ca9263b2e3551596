import type { CommandContext } from './context';
import { CommandError } from './errors';

/** A stepped-down (simulated) node refuses writes like a secondary does. */
export function assertWritablePrimary(context: CommandContext): void {
  if (!context.server.isWritablePrimary) throw new CommandError(10107, 'not primary');
}

export function requireArray(value: unknown, field: string): unknown[] {
  if (!Array.isArray(value)) {
    throw new CommandError(
      14,
      `BSON field '${field}' is the wrong type '${typeof value}', expected type 'array'`,
    );
  }
  return value;
}
