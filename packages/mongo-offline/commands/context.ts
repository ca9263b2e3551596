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
  /** Aborts when the connection has closed. */
  readonly closing: AbortSignal;
}

/** One command's view of the world; NOW and CLUSTER_TIME are fixed when it starts running. */
export class CommandContext {
  now = new Date();
  clusterTime: Timestamp;
  private mingoOptions: Partial<Options> | undefined;
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
    // A collation or `let` can be invalid: those options are built (and fail) here, as the
    // command starts. Without them building cannot fail, and waits for a command that uses
    // mingo (ping, hello and getMore never do).
    if (command.collation !== undefined || command.let !== undefined) {
      this.mingoOptions = this.buildMingoOptions();
    }
  }

  /**
   * The command runs only now (a `failCommand` block held it): NOW and CLUSTER_TIME are read
   * again, as a server fixes them when the command runs, not when it arrived.
   */
  startsRunning(): void {
    this.now = new Date();
    this.clusterTime = this.server.storage.clock.now();
    if (this.mingoOptions) this.mingoOptions = this.buildMingoOptions();
  }

  /** mingo options with this command's NOW, CLUSTER_TIME, `let` values and collation. */
  get mingo(): Partial<Options> {
    this.mingoOptions ??= this.buildMingoOptions();
    return this.mingoOptions;
  }

  private buildMingoOptions(): Partial<Options> {
    const { command } = this;
    const variables: Document = { NOW: this.now, CLUSTER_TIME: this.clusterTime };
    const options = commandMingoOptions(variables, command.collation as Document | undefined);
    if (!command.let || typeof command.let !== 'object') return options;
    // `let` values are expressions, evaluated once for the command (`$literal`, `$rand`...).
    const values: Document = {};
    for (const [name, expression] of Object.entries(command.let as Document)) {
      values[name] = evalExpr({}, bindSystemVariables(expression, variables), options as Options);
    }
    return commandMingoOptions(
      { ...variables, ...values },
      command.collation as Document | undefined,
    );
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
