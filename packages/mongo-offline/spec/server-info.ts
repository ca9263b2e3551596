// What the runOnRequirements of the spec files are evaluated against: the connected server.
import type { Document, MongoClient } from 'mongodb';

export type Topology = 'single' | 'replicaset' | 'sharded' | 'load-balanced';

export interface ServerInfo {
  /** The fixture's kind of server (`offline` is the project's own test server). */
  kind: string;
  /** `buildInfo.versionArray`, major.minor.patch only. */
  version: [number, number, number];
  topology: Topology;
  auth: boolean;
  /** Atlas Serverless is never what the fixture gives. */
  serverless: boolean;
  /** `getParameter: '*'`, or empty when the server refuses it. */
  serverParameters: Document;
}

export async function probeServer(client: MongoClient, uri: string, kind: string) {
  const admin = client.db('admin');
  const buildInfo = await admin.command({ buildInfo: 1 });
  const hello = await admin.command({ hello: 1 });
  let serverParameters: Document = {};
  try {
    serverParameters = await admin.command({ getParameter: '*' });
  } catch {
    // A server without getParameter fails every serverParameters requirement, as the spec says.
  }
  const info: ServerInfo = {
    kind,
    version: versionOf(buildInfo),
    topology: topologyOf(hello, uri),
    auth: /^mongodb(\+srv)?:\/\/[^/@]+@/.test(uri),
    serverless: false,
    serverParameters,
  };
  return info;
}

function versionOf(buildInfo: Document): [number, number, number] {
  const parts: unknown[] = Array.isArray(buildInfo.versionArray)
    ? buildInfo.versionArray
    : String(buildInfo.version ?? '0').split(/[.-]/);
  const [major, minor, patch] = [0, 1, 2].map((i) => Number(parts[i] ?? 0) || 0);
  return [major, minor, patch];
}

function topologyOf(hello: Document, uri: string): Topology {
  if (/[?&]loadBalanced=true/i.test(uri)) return 'load-balanced';
  if (hello.msg === 'isdbgrid') return 'sharded';
  if (hello.setName) return 'replicaset';
  return 'single';
}

export function describeServer(info: ServerInfo): string {
  return `${info.kind} server ${info.version.join('.')} (${info.topology})`;
}
