import { type AddressInfo, type Server, type Socket, createServer } from 'node:net';
import { ServerConnection } from './server-connection';
import { type ServerOptions, ServerState } from './server-state';

/** The TCP listener; owns the sockets so that stop() can end them all. */
export class OfflineMongoServer {
  readonly state: ServerState;
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();

  constructor(options: ServerOptions) {
    this.state = new ServerState(options);
    this.server = createServer((socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      new ServerConnection(this.state, socket);
    });
  }

  async listen(): Promise<number> {
    const { host, port } = this.state.options;
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    const actualPort = (this.server.address() as AddressInfo).port;
    this.state.options.port = actualPort;
    this.state.start();
    return actualPort;
  }

  async stop(): Promise<void> {
    this.state.stop();
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
