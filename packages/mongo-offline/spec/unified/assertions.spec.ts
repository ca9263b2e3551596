import {
  MongoClient,
  MongoClientBulkWriteError,
  MongoNetworkError,
  MongoServerError,
} from 'mongodb';
import { EntityMap } from './entities';
import { EventRecorder } from './event-recorder';
import { assertExpectedError } from './expected-error';
import { assertExpectedEvents } from './expected-events';

const entities = new EntityMap();
const serverError = () =>
  new MongoServerError({
    ok: 0,
    code: 280,
    codeName: 'ChangeStreamFatalError',
    errmsg: 'Cannot project out _id',
    errorLabels: ['NonResumableChangeStreamError'],
  });

describe('expectError', () => {
  it('accepts a matching server error', () => {
    const expected = {
      isClientError: false,
      errorCode: 280,
      errorCodeName: 'changestreamfatalerror',
      errorContains: 'PROJECT OUT',
      errorLabelsContain: ['NonResumableChangeStreamError'],
      errorLabelsOmit: ['RetryableWriteError'],
      errorResponse: { code: 280, errmsg: { $$type: 'string' } },
    };
    expect(() => assertExpectedError(expected, serverError(), entities)).not.toThrow();
  });

  it('tells client errors from server errors', () => {
    const network = new MongoNetworkError('connection closed');
    expect(() => assertExpectedError({ isClientError: true }, network, entities)).not.toThrow();
    expect(() => assertExpectedError({ isClientError: true }, serverError(), entities)).toThrow();
    expect(() => assertExpectedError({ errorCode: 8 }, serverError(), entities)).toThrow(/280/);
    expect(() => assertExpectedError({ errorResponse: {} }, network, entities)).toThrow(
      /no server response/,
    );
  });

  it('checks labels both ways', () => {
    const omit = { errorLabelsOmit: ['NonResumableChangeStreamError'] };
    expect(() => assertExpectedError(omit, serverError(), entities)).toThrow();
    const contain = { errorLabelsContain: ['RetryableWriteError'] };
    expect(() => assertExpectedError(contain, serverError(), entities)).toThrow();
  });
});

describe('expectError on a client bulk write', () => {
  it('judges the top-level error (its cause), not the per-write errors', () => {
    const error = new MongoClientBulkWriteError({ message: 'bulk write failed' });
    error.writeErrors.set(0, { code: 11000, message: 'E11000 duplicate key' });
    expect(() => assertExpectedError({ errorContains: 'duplicate' }, error, entities)).toThrow();
    expect(() =>
      assertExpectedError({ writeErrors: { 0: { code: 11000 } } }, error, entities),
    ).not.toThrow();
    error.cause = new MongoNetworkError('connection closed');
    expect(() => assertExpectedError({ isClientError: true }, error, entities)).not.toThrow();
  });
});

describe('expectEvents', () => {
  function clientWithEvents(events: Array<[string, object]>, ignore: string[] = []) {
    const client = new MongoClient('mongodb://127.0.0.1:1');
    const map = new EntityMap();
    const recorder = new EventRecorder(
      client,
      ['commandStartedEvent', 'commandSucceededEvent'],
      ignore,
    );
    map.set('client0', { kind: 'client', value: { client, recorder } });
    for (const [name, event] of events) client.emit(name as 'commandStarted', event as never);
    return map;
  }
  const find = {
    commandName: 'find',
    databaseName: 'db',
    command: { find: 'c', filter: {}, lsid: {} },
  };
  const ok = { commandName: 'find', reply: { ok: 1, cursor: { id: 0 } } };

  it('matches events in order, commands as root-level documents', () => {
    const map = clientWithEvents([
      ['commandStarted', find],
      ['commandSucceeded', ok],
    ]);
    const expected = [
      { commandStartedEvent: { command: { find: 'c' }, commandName: 'find', databaseName: 'db' } },
      { commandSucceededEvent: { reply: { ok: 1 }, commandName: 'find' } },
    ];
    expect(() =>
      assertExpectedEvents([{ client: 'client0', events: expected }], map),
    ).not.toThrow();
  });

  it('fails on extra events unless ignoreExtraEvents, and on missing ones', () => {
    const map = clientWithEvents([
      ['commandStarted', find],
      ['commandSucceeded', ok],
    ]);
    const one = [{ commandStartedEvent: { commandName: 'find' } }];
    expect(() => assertExpectedEvents([{ client: 'client0', events: one }], map)).toThrow(
      /2 events/,
    );
    const lenient = { client: 'client0', events: one, ignoreExtraEvents: true };
    expect(() => assertExpectedEvents([lenient], map)).not.toThrow();
    expect(() => assertExpectedEvents([{ client: 'client0', events: [] }], map)).toThrow();
  });

  it('drops ignored commands and configureFailPoint', () => {
    const failPoint = { commandName: 'configureFailPoint', command: { configureFailPoint: 'x' } };
    const kill = { commandName: 'killCursors', command: { killCursors: 'c' } };
    const map = clientWithEvents(
      [
        ['commandStarted', failPoint],
        ['commandStarted', kill],
      ],
      ['killCursors'],
    );
    expect(() => assertExpectedEvents([{ client: 'client0', events: [] }], map)).not.toThrow();
  });
});
