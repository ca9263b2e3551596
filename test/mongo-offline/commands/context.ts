import type { Document, Timestamp } from 'bson';
import type { Options } from 'mingo/types';
import type { ServerState } from '../server-state';
import type { WriteOrigin } from '../engine/storage';
import { evalExpr } from 'mingo/core';
import { commandMingoOptions } from '../engine/mingo-options';
import { bindSystemVariables } from '../engine/system-variables';
import type { DataStore } from '../engine/data-store';

/** What a command knows about the connection it arrived on. */
export interface ConnectionInfo {
  id: number;
  appName?: string;
  /** Destroys the socket without a reply (closeConnection fail points). */
  close(): void;
}

/** One command's view of the world; NOW and CLUSTER_TIME are fixed when it starts. */
export class CommandContext {
  readonly now = new Date();
  readonly clusterTime: Timestamp;
  readonly mingo: Partial<Options>;
  /** The real storage, or the view of the transaction this command belongs to. */
  storage: DataStore;

  constructor(
    readonly server: ServerState,
    readonly db: string,
    readonly name: string,
    readonly command: Document,
    readonly connection: ConnectionInfo,
  ) {
    this.storage = server.storage;
    this.clusterTime = server.storage.clock.now();
    const variables: Document = { NOW: this.now, CLUSTER_TIME: this.clusterTime };
    this.mingo = commandMingoOptions(variables, command.collation as Document | undefined);
    if (command.let && typeof command.let === 'object') {
      // `let` values are expressions, evaluated once for the command (`$literal`, `$rand`...).
      const values: Document = {};
      for (const [name, expression] of Object.entries(command.let as Document)) {
        values[name] = evalExpr(
          {},
          bindSystemVariables(expression, variables),
          this.mingo as Options,
        );
      }
      this.mingo = commandMingoOptions(
        { ...variables, ...values },
        command.collation as Document | undefined,
      );
    }
  }

  /** The collection named by the command's first field (`{find: 'coll'}`). */
  get collectionName(): string {
    return String(this.command[this.name]);
  }

  get ns(): string {
    return `${this.db}.${this.collectionName}`;
  }

  get origin(): WriteOrigin {
    const txnNumber = this.command.txnNumber as number | undefined;
    return { lsid: this.command.lsid as Document | undefined, txnNumber };
  }
}

export type CommandHandler = (context: CommandContext) => Document | Promise<Document>;
