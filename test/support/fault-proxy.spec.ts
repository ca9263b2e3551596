import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import * as net from 'node:net';
import { MongoClient } from 'mongodb';
import { startOfflineMongo, type OfflineMongo } from '@nestjs-mongo-lock/mongo-offline';
import { FaultProxy, passThrough, proxiedUri, proxyTarget } from './fault-proxy';
import { pendingPipeTimers } from './fault-proxy-pipe';

/** An echo server on loopback: every byte it receives goes straight back. */
async function startEcho(): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
    socket.pipe(socket);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as net.AddressInfo).port,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A client of the proxy that collects what comes back. */
class Client {
  readonly socket: net.Socket;
  received = Buffer.alloc(0);
  chunks = 0;
  error: Error | undefined;
  readonly closed: Promise<void>;

  constructor(port: number) {
    this.socket = net.connect({ host: '127.0.0.1', port });
    this.socket.on('data', (chunk: Buffer) => {
      this.received = Buffer.concat([this.received, chunk]);
      this.chunks++;
    });
    this.socket.on('error', (error) => (this.error = error));
    this.closed = new Promise((resolve) => this.socket.once('close', () => resolve()));
  }

  async connected(): Promise<this> {
    await once(this.socket, 'connect');
    return this;
  }

  async receive(bytes: number, timeoutMs = 5000): Promise<Buffer> {
    const deadline = Date.now() + timeoutMs;
    while (this.received.length < bytes && Date.now() < deadline && !this.socket.destroyed) {
      await sleep(2);
    }
    return this.received;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Open handles of the kinds a proxy could leak (its timers are counted by the pipes). */
function handleCounts(): Record<string, number> {
  const counts: Record<string, number> = { TCPSocketWrap: 0, TCPServerWrap: 0 };
  for (const kind of process.getActiveResourcesInfo()) {
    if (kind in counts) counts[kind]++;
  }
  return counts;
}

describe('FaultProxy (TCP, loopback)', () => {
  let echo: Awaited<ReturnType<typeof startEcho>>;
  let proxy: FaultProxy;

  beforeEach(async () => {
    echo = await startEcho();
    proxy = new FaultProxy({ host: '127.0.0.1', port: echo.port });
    await proxy.start();
  });

  afterEach(async () => {
    await proxy.stop();
    await echo.close();
  });

  it('listens on 127.0.0.1 only', () => {
    const address = (proxy as unknown as { listener: net.Server }).listener.address();
    expect(address).toMatchObject({ address: '127.0.0.1', family: 'IPv4' });
  });

  it('passes bytes through exactly, both ways', async () => {
    const client = await new Client(proxy.port).connected();
    const sent = randomBytes(1 << 20);
    for (let offset = 0; offset < sent.length; offset += 50_000) {
      client.socket.write(sent.subarray(offset, offset + 50_000));
    }
    const received = await client.receive(sent.length);
    expect(received.equals(sent)).toBe(true);
    expect(proxy.counters).toMatchObject({ connections: 1, open: 1, bytesUp: sent.length });
    expect(proxy.counters.bytesDown).toBe(sent.length);
  });

  it('delays each chunk in both directions and keeps byte order under jitter', async () => {
    const client = await new Client(proxy.port).connected();
    proxy.setMode({ latency: { baseMs: 60, jitterMs: 40 } });
    const startedAt = Date.now();
    client.socket.write('x');
    await client.receive(1);
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(115);

    const sent = Buffer.from(Array.from({ length: 200 }, (_, i) => `<${i}>`).join(''));
    for (let offset = 0; offset < sent.length; offset += 7) {
      client.socket.write(sent.subarray(offset, offset + 7));
      await sleep(offset % 3);
    }
    const received = await client.receive(1 + sent.length);
    expect(received.subarray(1).toString()).toBe(sent.toString());
  });

  it('holds every byte in a black hole, then releases them in order', async () => {
    const client = await new Client(proxy.port).connected();
    proxy.setMode({ blackHole: 'release' });
    client.socket.write('held ');
    client.socket.write('in order');
    await sleep(300);
    expect(client.received.length).toBe(0);
    expect(client.socket.destroyed).toBe(false);
    expect(proxy.counters.bytesUp).toBe(0);
    proxy.setMode(passThrough);
    expect((await client.receive(13)).toString()).toBe('held in order');
  });

  it('delivers a request held in a black hole even if its client left meanwhile', async () => {
    let delivered = '';
    const sink = net.createServer((socket) => {
      socket.on('data', (chunk: Buffer) => (delivered += chunk.toString()));
      socket.on('error', () => undefined);
    });
    sink.listen(0, '127.0.0.1');
    await once(sink, 'listening');
    const toSink = new FaultProxy({
      host: '127.0.0.1',
      port: (sink.address() as net.AddressInfo).port,
    });
    try {
      const client = new Client(await toSink.start());
      await client.connected();
      toSink.setMode({ blackHole: 'release' });
      client.socket.end('late request');
      client.socket.destroy();
      await client.closed;
      await sleep(100);
      expect(delivered).toBe('');
      toSink.setMode(passThrough);
      for (let i = 0; i < 100 && delivered === ''; i++) await sleep(10);
      expect(delivered).toBe('late request');
    } finally {
      await toSink.stop();
      await new Promise((resolve) => sink.close(resolve));
    }
  });

  it('resets the connections a dropping black hole held, with their bytes', async () => {
    const client = await new Client(proxy.port).connected();
    proxy.setMode({ blackHole: 'drop' });
    client.socket.write('never delivered');
    await sleep(100);
    proxy.setMode(passThrough);
    await client.closed;
    expect(client.received.length).toBe(0);
    expect(client.error?.message).toMatch(/ECONNRESET/);
    expect(proxy.counters).toMatchObject({ dropped: 1, bytesUp: 0 });
  });

  describe('cut and dripped replies', () => {
    // Rarely (twice in about twenty runs, on a loaded machine) the client saw the cut reply end
    // without ECONNRESET, though the proxy reset the socket: a retry tells that apart from a
    // reset that never happens, which fails every try.
    jest.retryTimes(2, { logErrorsBeforeRetry: true });

    it('resets the connection in the middle of a reply', async () => {
      const client = await new Client(proxy.port).connected();
      proxy.setMode({ reset: { probability: 1 } });
      const sent = Buffer.alloc(1000, 'r');
      client.socket.write(sent);
      await client.closed;
      expect(client.received.length).toBeGreaterThan(0);
      expect(client.received.length).toBeLessThan(sent.length);
      expect(client.error?.message).toMatch(/ECONNRESET/);
      expect(proxy.counters.resets).toBe(1);
    });

    it('drips replies in small pieces without losing or reordering a byte', async () => {
      const client = await new Client(proxy.port).connected();
      proxy.setMode({ drip: { bytes: 10, delayMs: 5 } });
      const sent = randomBytes(300);
      const startedAt = Date.now();
      client.socket.write(sent);
      const received = await client.receive(sent.length);
      expect(received.equals(sent)).toBe(true);
      expect(client.chunks).toBeGreaterThanOrEqual(10);
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(29 * 5);
    });

    it('modes combine: latency and drip, then a reset in the middle of a dripped reply', async () => {
      const client = await new Client(proxy.port).connected();
      const slow = { latency: { baseMs: 5, jitterMs: 5 }, drip: { bytes: 4, delayMs: 1 } };
      proxy.setMode(slow);
      client.socket.write('one.two.');
      expect((await client.receive(8)).toString()).toBe('one.two.');
      proxy.setMode({ ...slow, reset: { probability: 1 } });
      client.socket.write('three.four.five.');
      await client.closed;
      expect(client.received.toString()).toMatch(/^one\.two\.t/);
      expect(client.received.length).toBeLessThan(8 + 16);
      expect(client.error?.message).toMatch(/ECONNRESET/);
      expect(proxy.counters.resets).toBe(1);
    });
  });

  it('stop() closes every connection and leaves no socket or timer behind', async () => {
    await sleep(20); // handles of earlier tests finish closing
    const before = handleCounts();
    const timersBefore = pendingPipeTimers();
    const port = proxy.port;
    const clients = await Promise.all(
      Array.from({ length: 4 }, () => new Client(proxy.port).connected()),
    );
    proxy.setMode({ latency: { baseMs: 10_000 } });
    clients[0].socket.write('queued behind a long latency');
    await sleep(50);
    proxy.setMode({ blackHole: 'release' });
    clients[1].socket.write('held in a black hole');
    await sleep(50);
    expect(proxy.counters.open).toBe(4);
    expect(proxy.counters.timers).toBeGreaterThan(0);

    await proxy.stop();
    await Promise.all(clients.map((c) => c.closed));
    expect(proxy.counters).toMatchObject({ open: 0, timers: 0 });
    // The pipes' own timers, not the process's: other code's short timers come and go.
    expect(pendingPipeTimers()).toBe(timersBefore);
    await sleep(20);
    const after = handleCounts();
    expect(after.TCPSocketWrap).toBeLessThanOrEqual(before.TCPSocketWrap);
    expect(after.TCPServerWrap).toBe(before.TCPServerWrap - 1);
    await expect(new Client(port).connected()).rejects.toThrow(/ECONNREFUSED/);
  });
});

describe('the driver through a FaultProxy to the offline server', () => {
  let mongo: OfflineMongo;
  let proxy: FaultProxy;
  let direct: MongoClient;

  beforeAll(async () => {
    mongo = await startOfflineMongo();
    direct = await MongoClient.connect(mongo.uri);
  });

  afterAll(async () => {
    await direct.close();
    await mongo.stop();
  });

  beforeEach(async () => {
    proxy = new FaultProxy(proxyTarget(mongo.uri));
    await proxy.start();
  });

  afterEach(() => proxy.stop());

  it('builds the proxied URI: loopback host, no replicaSet, directConnection', () => {
    expect(proxiedUri('mongodb://u:p@db.example:27018/app?replicaSet=rs0&w=majority', 4000)).toBe(
      'mongodb://u:p@127.0.0.1:4000/app?w=majority&directConnection=true',
    );
    expect(proxyTarget('mongodb://u:p@db.example:27018,other:1/app')).toEqual({
      host: 'db.example',
      port: 27018,
    });
    expect(proxyTarget('mongodb://[::1]/x')).toEqual({ host: '::1', port: 27017 });
  });

  it('with directConnection=true, change streams run through the proxy and resume after a reset', async () => {
    const client = await MongoClient.connect(proxiedUri(mongo.uri, proxy.port));
    try {
      const collection = client.db('proxy_spec').collection('events');
      const stream = collection.watch();
      await stream.tryNext();
      await direct.db('proxy_spec').collection('events').insertOne({ n: 1 });
      expect((await stream.next()).operationType).toBe('insert');

      proxy.setMode({ reset: { probability: 1 } });
      const next = stream.next();
      await sleep(200);
      await direct.db('proxy_spec').collection('events').insertOne({ n: 2 });
      await sleep(200);
      proxy.setMode(passThrough);
      const event = (await next) as { fullDocument?: { n: number } };
      expect(event.fullDocument?.n).toBe(2);
      expect(proxy.counters.resets).toBeGreaterThan(0);
      await stream.close();
    } finally {
      await client.close();
    }
  });

  it('with replicaSet= in the URI, the driver learns the real address and leaves the proxy', async () => {
    const uri = `mongodb://127.0.0.1:${proxy.port}/?replicaSet=rs0`;
    const client = await MongoClient.connect(uri);
    try {
      await client.db('proxy_spec').command({ ping: 1 });
      const bytes = proxy.counters.bytesUp;
      for (let i = 0; i < 5; i++) await client.db('proxy_spec').command({ ping: 1 });
      expect(proxy.counters.bytesUp).toBe(bytes);
    } finally {
      await client.close();
    }
  });
});
