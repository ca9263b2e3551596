// The entity map of one unified test, and `createEntities`.
import {
  MongoClient,
  ReadPreference,
  type ChangeStream,
  type ClientSession,
  type Collection,
  type Db,
  type Document,
  type FindCursor,
  type RunCommandCursor,
} from 'mongodb';
import type { MatchEntities } from '../matching/match';
import type { RunContext } from '../run-context';
import { clientUri } from './client-uri';
import { EventRecorder } from './event-recorder';

export interface ClientEntity {
  client: MongoClient;
  recorder: EventRecorder;
}

type EntityValue =
  | { kind: 'client'; value: ClientEntity }
  | { kind: 'database'; value: Db }
  | { kind: 'collection'; value: Collection }
  | { kind: 'session'; value: ClientSession; lsid: Document }
  | { kind: 'changeStream'; value: ChangeStream }
  | { kind: 'cursor'; value: FindCursor | RunCommandCursor }
  | { kind: 'bson'; value: unknown };

export type EntityKind = EntityValue['kind'];
type ValueOf<K extends EntityKind> = Extract<EntityValue, { kind: K }>['value'];

export class EntityMap implements MatchEntities {
  private readonly entries = new Map<string, EntityValue>();

  set(id: string, entity: EntityValue) {
    if (this.entries.has(id)) throw new Error(`Entity ${id} already exists`);
    this.entries.set(id, entity);
  }

  get<K extends EntityKind>(id: string, kind: K): ValueOf<K> {
    const entity = this.entries.get(id);
    if (!entity) throw new Error(`Entity ${id} is not defined`);
    if (entity.kind !== kind) throw new Error(`Entity ${id} is a ${entity.kind}, not a ${kind}`);
    return entity.value as ValueOf<K>;
  }

  kindOf(id: string): EntityKind {
    const entity = this.entries.get(id);
    if (!entity) throw new Error(`Entity ${id} is not defined`);
    return entity.kind;
  }

  /** The driver object behind an entity name, whatever its kind. */
  any(id: string): unknown {
    const entity = this.entries.get(id);
    if (!entity) throw new Error(`Entity ${id} is not defined`);
    return entity.value;
  }

  entityValue(id: string): unknown {
    return this.get(id, 'bson');
  }

  sessionLsid(id: string): Document {
    this.get(id, 'session');
    return (this.entries.get(id) as { lsid: Document }).lsid;
  }

  clients(): ClientEntity[] {
    return [...this.entries.values()].flatMap((e) => (e.kind === 'client' ? [e.value] : []));
  }

  /** Ends sessions, closes cursors, change streams and clients; errors are not the test's. */
  async close() {
    const all = [...this.entries.values()];
    const kinds = ['cursor', 'changeStream', 'session', 'client'] as const;
    for (const kind of kinds) {
      for (const entity of all.filter((e) => e.kind === kind)) {
        try {
          if (entity.kind === 'session') await entity.value.endSession();
          else if (entity.kind === 'client') await entity.value.client.close();
          else if (entity.kind === 'cursor' || entity.kind === 'changeStream') {
            await entity.value.close();
          }
        } catch {
          // Clean-up of a failed test must not hide its real failure.
        }
      }
    }
    this.entries.clear();
  }
}

/** Creates the entities in order, each after those it refers to. */
export async function createEntities(entities: EntityMap, specs: any[], ctx: RunContext) {
  for (const spec of specs) {
    const [kind, options] = Object.entries(spec)[0] as [string, any];
    switch (kind) {
      case 'client':
        entities.set(options.id, { kind: 'client', value: await createClient(options, ctx) });
        break;
      case 'database': {
        const { client } = entities.get(options.client, 'client');
        const db = client.db(options.databaseName, driverOptions(options.databaseOptions));
        entities.set(options.id, { kind: 'database', value: db });
        break;
      }
      case 'collection': {
        const db = entities.get(options.database, 'database');
        const coll = db.collection(
          options.collectionName,
          driverOptions(options.collectionOptions),
        );
        entities.set(options.id, { kind: 'collection', value: coll });
        break;
      }
      case 'session': {
        const { client } = entities.get(options.client, 'client');
        const session = client.startSession(sessionOptions(options.sessionOptions));
        entities.set(options.id, { kind: 'session', value: session, lsid: session.id! });
        break;
      }
      default:
        throw new Error(`Entity type ${kind} is not supported by this runner`);
    }
  }
}

async function createClient(options: any, ctx: RunContext): Promise<ClientEntity> {
  const uri = clientUri(
    ctx.uri,
    options.uriOptions,
    options.useMultipleMongoses,
    ctx.server.topology,
  );
  const observed: string[] = options.observeEvents ?? [];
  const client = new MongoClient(uri, {
    monitorCommands: observed.length > 0,
    ...(options.serverApi ? { serverApi: options.serverApi } : {}),
  });
  const recorder = new EventRecorder(client, observed, options.ignoreCommandMonitoringEvents);
  await client.connect();
  return { client, recorder };
}

/** readConcern, readPreference, writeConcern and timeoutMS as the driver takes them. */
export function driverOptions(options: Document | undefined): Document {
  if (!options) return {};
  const { readPreference, writeConcern, ...rest } = options;
  const converted: Document = { ...rest };
  if (readPreference) converted.readPreference = toReadPreference(readPreference);
  if (writeConcern) converted.writeConcern = toWriteConcern(writeConcern);
  return converted;
}

export function toReadPreference(spec: Document): ReadPreference {
  return new ReadPreference(spec.mode, spec.tagSets, {
    maxStalenessSeconds: spec.maxStalenessSeconds,
    hedge: spec.hedge,
  });
}

function toWriteConcern(spec: Document): Document {
  const { journal, wtimeoutMS, w } = spec;
  return { w, journal, wtimeoutMS };
}

function sessionOptions(options: Document | undefined): Document | undefined {
  if (!options?.defaultTransactionOptions) return options;
  return {
    ...options,
    defaultTransactionOptions: driverOptions(options.defaultTransactionOptions),
  };
}
