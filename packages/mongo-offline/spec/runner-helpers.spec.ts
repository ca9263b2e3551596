import { unmetLegacyRequirements, unmetRequirements } from './requirements';
import type { ServerInfo } from './server-info';
import { offlineSkipReason, unusedSkips } from './skips';
import { unifiedArguments } from './crud-v1/run-crud-v1-test';
import { clientUri } from './unified/client-uri';
import { unsupportedSchemaVersion } from './unified/run-unified-test';

const server: ServerInfo = {
  kind: 'offline',
  version: [7, 0, 14],
  topology: 'replicaset',
  auth: false,
  serverless: false,
  serverParameters: { enableTestCommands: 1 },
};

describe('runOnRequirements', () => {
  it('compares versions component by component, both bounds inclusive', () => {
    expect(unmetRequirements([{ minServerVersion: '7.0.14' }], server)).toBeUndefined();
    expect(unmetRequirements([{ minServerVersion: '7.0.15' }], server)).toMatch(/>= 7.0.15/);
    expect(unmetRequirements([{ maxServerVersion: '7.0' }], server)).toMatch(/<= 7.0/);
    expect(unmetRequirements([{ maxServerVersion: '7.99' }], server)).toBeUndefined();
  });

  it('is met when any one requirement is', () => {
    const reqs = [{ topologies: ['sharded'] }, { topologies: ['single', 'replicaset'] }];
    expect(unmetRequirements(reqs, server)).toBeUndefined();
    expect(unmetRequirements([{ topologies: ['sharded'] }], server)).toMatch(/topology/);
  });

  it('checks serverless, auth and server parameters', () => {
    expect(unmetRequirements([{ serverless: 'forbid' }], server)).toBeUndefined();
    expect(unmetRequirements([{ serverless: 'require' }], server)).toBeDefined();
    expect(unmetRequirements([{ auth: true }], server)).toBeDefined();
    expect(unmetRequirements([{ serverParameters: { enableTestCommands: 1.0 } }], server)).toBe(
      undefined,
    );
    expect(unmetRequirements([{ serverParameters: { other: 1 } }], server)).toBeDefined();
  });

  it('reads the CRUD v1 fields with an exclusive maximum', () => {
    expect(unmetLegacyRequirements({ minServerVersion: '3.4' }, server)).toBeUndefined();
    expect(unmetLegacyRequirements({ maxServerVersion: '7.0.14' }, server)).toBeDefined();
  });
});

describe('skip list', () => {
  const list = [
    { file: 'crud-legacy-v1/*-collation.json', test: '*', reason: 'collation' },
    { file: 'crud/create-null-ids.json', test: 'via insertOne', reason: 'driver' },
  ];

  it('matches file patterns, whole files and single tests at the end of the path', () => {
    expect(offlineSkipReason('crud-legacy-v1/read/find-collation.json', 'x', list)).toBe(
      'collation',
    );
    expect(offlineSkipReason('crud-legacy-v1/read/find.json', 'x', list)).toBeUndefined();
    expect(offlineSkipReason('/x/spec/crud/create-null-ids.json', 'via insertOne', list)).toBe(
      'driver',
    );
    expect(offlineSkipReason('/x/spec/crud/create-null-ids.json', 'other', list)).toBeUndefined();
    expect(offlineSkipReason('/x/othercrud/create-null-ids.json', 'via insertOne', list)).toBe(
      undefined,
    );
  });

  it('reports entries that match no test', () => {
    const seen = [{ path: '/s/crud-legacy-v1/write/x-collation.json', description: 'a' }];
    expect(unusedSkips(seen, list).map((entry) => entry.reason)).toEqual(['driver']);
  });
});

describe('client entity URI', () => {
  it('adds uriOptions, overriding the same option case-insensitively', () => {
    const uri = clientUri(
      'mongodb://h:1/?replicaSet=rs0&RETRYREADS=true',
      { retryReads: false },
      undefined,
      'replicaset',
    );
    expect(uri).toBe('mongodb://h:1/?replicaSet=rs0&retryReads=false');
  });

  it('keeps one mongos when useMultipleMongoses is false on a sharded cluster', () => {
    expect(clientUri('mongodb://u:p@a:1,b:2/db', {}, false, 'sharded')).toBe(
      'mongodb://u:p@a:1/db',
    );
    expect(clientUri('mongodb://a:1,b:2', {}, false, 'replicaset')).toBe('mongodb://a:1,b:2/');
  });
});

describe('formats', () => {
  it('refuses unified files newer than the runner', () => {
    expect(unsupportedSchemaVersion('1.0')).toBeUndefined();
    expect(unsupportedSchemaVersion('1.99')).toBeDefined();
    expect(unsupportedSchemaVersion('2.0')).toBeDefined();
  });

  it('translates CRUD v1 bulk requests and nested options', () => {
    const args = unifiedArguments('bulkWrite', {
      requests: [{ name: 'deleteOne', arguments: { filter: { _id: 1 } } }],
      options: { ordered: false },
    });
    expect(args).toEqual({ requests: [{ deleteOne: { filter: { _id: 1 } } }], ordered: false });
  });
});
