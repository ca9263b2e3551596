/**
 * What a wall-clock bound in a test adds to the product's contract for a loaded machine.
 *
 * Measured: a full `npm test` on 2 cores with two CPU burners (load average 8 to 12). An idle
 * process's timers then fire up to ~60 ms late, but a Jest worker that also runs the offline
 * MongoDB server, the driver and ts-jest gets a fraction of a core: a step that takes 50 ms on
 * an idle machine takes several hundred, and a chain of them (command, reply, change event,
 * attempt) over a second.
 *
 * A test that uses it must still fail when the behaviour it names breaks: its fault is sized
 * so that the broken outcome (waiting for a blocked reply, a 30 s server selection, a poll
 * minutes away, never) lands well beyond `contract + LOAD_SLACK_MS`, and a comment there
 * says what the broken outcome is. Where that cannot be, the test checks an order instead.
 */
export const LOAD_SLACK_MS = 1_500;
