/** What the waiting layer logs through; Nest's `Logger` fits, and so does `console`. */
export interface WaitLogger {
  warn(message: string): void;
  error(message: string): void;
}
