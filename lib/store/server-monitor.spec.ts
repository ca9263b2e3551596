import { MongoClient } from 'mongodb';
import { monitorServers } from './server-monitor';

// The monitor's reading of the driver's events; a client that never connects emits them here.
const failed = (client: MongoClient, address: string, message: string) =>
  client.emit('serverHeartbeatFailed', {
    connectionId: address,
    failure: new Error(message),
  } as never);
const succeeded = (client: MongoClient, address: string) =>
  client.emit('serverHeartbeatSucceeded', { connectionId: address } as never);
const closed = (client: MongoClient, address: string) =>
  client.emit('serverClosed', { address } as never);

describe('monitorServers', () => {
  let client: MongoClient;
  beforeEach(() => (client = new MongoClient('mongodb://127.0.0.1:1/')));

  it('names the last failure while every server checked fails, and none once one answers', () => {
    const monitor = monitorServers(client);
    expect(monitor.lastFailure).toBeUndefined();
    failed(client, 'a:1', 'refused a');
    expect(monitor.lastFailure?.message).toBe('refused a');
    failed(client, 'b:1', 'refused b');
    expect(monitor.lastFailure?.message).toBe('refused b');
    succeeded(client, 'a:1');
    expect(monitor.lastFailure).toBeUndefined();
    monitor.stop();
  });

  it('does not blame a member that is down while another answers', () => {
    const monitor = monitorServers(client);
    succeeded(client, 'primary:1');
    failed(client, 'secondary:1', 'refused secondary');
    expect(monitor.lastFailure).toBeUndefined();
    // The answering server leaves the topology: only the failing one is checked.
    closed(client, 'primary:1');
    expect(monitor.lastFailure?.message).toBe('refused secondary');
    monitor.stop();
  });

  it('keeps one set of listeners per client, gone with its last user', () => {
    const monitors = Array.from({ length: 12 }, () => monitorServers(client));
    expect(client.listenerCount('serverHeartbeatFailed')).toBe(1);
    failed(client, 'a:1', 'refused');
    expect(monitors[11].lastFailure?.message).toBe('refused');
    monitors[0].stop();
    monitors[0].stop(); // a second stop of one user does nothing
    expect(client.listenerCount('serverHeartbeatFailed')).toBe(1);
    for (const monitor of monitors.slice(1)) monitor.stop();
    expect(client.listenerCount('serverHeartbeatFailed')).toBe(0);
    expect(client.listenerCount('serverHeartbeatSucceeded')).toBe(0);
    expect(client.listenerCount('serverClosed')).toBe(0);
  });
});
