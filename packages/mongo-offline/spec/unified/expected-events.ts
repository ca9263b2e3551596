// `expectEvents`: the command monitoring events each client observed, in order.
import type { Document } from 'mongodb';
import { assertMatches, describe } from '../matching/match';
import type { EntityMap } from './entities';
import { prefixed } from './execute-operation';
import type { RecordedEvent } from './event-recorder';

function summary(events: RecordedEvent[]): string {
  return events.map((e) => `${e.type}(${e.event.commandName})`).join(', ') || 'none';
}

function assertEvent(
  expected: Document,
  actual: RecordedEvent,
  index: number,
  entities: EntityMap,
) {
  const [type, fields] = Object.entries(expected)[0] as [string, Document];
  const where = `event ${index}`;
  if (type !== actual.type) {
    throw new Error(`${where} is ${actual.type}(${actual.event.commandName}), expected ${type}`);
  }
  const event: any = actual.event;
  if (fields.commandName !== undefined && fields.commandName !== event.commandName) {
    throw new Error(`${where} is ${event.commandName}, expected ${fields.commandName}`);
  }
  if (fields.databaseName !== undefined && fields.databaseName !== event.databaseName) {
    throw new Error(`${where} ran on ${event.databaseName}, expected ${fields.databaseName}`);
  }
  if (fields.command !== undefined) {
    assertMatches(fields.command, event.command, {
      root: true,
      entities,
      path: `${where}.command`,
    });
  }
  if (fields.reply !== undefined) {
    assertMatches(fields.reply, event.reply, { root: true, entities, path: `${where}.reply` });
  }
  if (fields.hasServiceId !== undefined && fields.hasServiceId !== (event.serviceId != null)) {
    throw new Error(`${where}: hasServiceId should be ${fields.hasServiceId}`);
  }
  if (
    fields.hasServerConnectionId !== undefined &&
    fields.hasServerConnectionId !== (event.serverConnectionId != null)
  ) {
    throw new Error(`${where}: hasServerConnectionId should be ${fields.hasServerConnectionId}`);
  }
}

export function assertExpectedEvents(expectations: Document[], entities: EntityMap) {
  for (const expectation of expectations) {
    const eventType = expectation.eventType ?? 'command';
    if (eventType !== 'command') throw new Error(`${eventType} events are not supported`);
    const { recorder } = entities.get(expectation.client, 'client');
    const actual = recorder.events;
    const expected: Document[] = expectation.events;
    const tooMany = !expectation.ignoreExtraEvents && actual.length > expected.length;
    if (actual.length < expected.length || tooMany) {
      throw new Error(
        `${expectation.client} observed ${actual.length} events, expected ${expected.length}` +
          `${expectation.ignoreExtraEvents ? ' or more' : ''}: ${summary(actual)}`,
      );
    }
    expected.forEach((event, i) => {
      try {
        assertEvent(event, actual[i], i, entities);
      } catch (error) {
        const detail = `\n  observed: ${summary(actual)}\n  expected: ${describe(event)}`;
        throw suffixed(prefixed(error, `${expectation.client} `), detail);
      }
    });
  }
}

function suffixed(error: Error, suffix: string): Error {
  error.message += suffix;
  return error;
}
