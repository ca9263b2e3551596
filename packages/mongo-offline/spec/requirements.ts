// runOnRequirements (unified format) and the top-level version fields of the CRUD v1 format.
import { scalarsEqual } from './matching/match';
import type { ServerInfo } from './server-info';

export interface RunOnRequirement {
  minServerVersion?: string;
  maxServerVersion?: string;
  topologies?: string[];
  serverless?: 'require' | 'forbid' | 'allow';
  serverParameters?: Record<string, unknown>;
  auth?: boolean;
  authMechanism?: string;
  csfle?: unknown;
}

/** Compares "4.0.10"-style versions component by component; missing components are zero. */
export function compareVersions(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < 3; i++) {
    const diff = (a[i] ?? 0) - (b[i] ?? 0);
    if (diff !== 0) return Math.sign(diff);
  }
  return 0;
}

export function parseVersion(text: string): number[] {
  return text.split('.').map((part) => Number.parseInt(part, 10) || 0);
}

/** Why one requirement is not met by the server, or undefined when it is. */
export function unmetRequirement(req: RunOnRequirement, server: ServerInfo): string | undefined {
  const version = server.version.join('.');
  if (
    req.minServerVersion &&
    compareVersions(server.version, parseVersion(req.minServerVersion)) < 0
  ) {
    return `needs server >= ${req.minServerVersion}, have ${version}`;
  }
  if (
    req.maxServerVersion &&
    compareVersions(server.version, parseVersion(req.maxServerVersion)) > 0
  ) {
    return `needs server <= ${req.maxServerVersion}, have ${version}`;
  }
  if (req.topologies && !topologyMatches(req.topologies, server.topology)) {
    return `needs topology ${req.topologies.join('/')}, have ${server.topology}`;
  }
  if (req.serverless === 'require' && !server.serverless) return 'needs Atlas Serverless';
  if (req.serverless === 'forbid' && server.serverless) return 'forbids Atlas Serverless';
  if (req.auth !== undefined && req.auth !== server.auth) {
    return req.auth ? 'needs authentication' : 'needs authentication off';
  }
  if (req.authMechanism) {
    const mechanisms = server.serverParameters.authenticationMechanisms;
    const wanted = req.authMechanism.toLowerCase();
    if (!Array.isArray(mechanisms) || !mechanisms.some((m) => String(m).toLowerCase() === wanted)) {
      return `needs auth mechanism ${req.authMechanism}`;
    }
  }
  if (req.csfle !== undefined && req.csfle !== false) return 'needs client-side encryption';
  for (const [name, value] of Object.entries(req.serverParameters ?? {})) {
    if (!(name in server.serverParameters) || !scalarsEqual(value, server.serverParameters[name])) {
      return `needs server parameter ${name}=${JSON.stringify(value)}`;
    }
  }
  return undefined;
}

function topologyMatches(wanted: string[], topology: ServerInfo['topology']): boolean {
  // All shards are replica sets nowadays, so "sharded-replicaset" is any sharded cluster.
  return wanted.some(
    (name) => name === topology || (name === 'sharded-replicaset' && topology === 'sharded'),
  );
}

/** Why none of the requirements is met (the first one's reason), or undefined if one is. */
export function unmetRequirements(
  reqs: RunOnRequirement[] | undefined,
  server: ServerInfo,
): string | undefined {
  if (!reqs || reqs.length === 0) return undefined;
  const reasons = reqs.map((req) => unmetRequirement(req, server));
  return reasons.includes(undefined) ? undefined : reasons.join('; ');
}

/** The CRUD v1 format: inclusive minimum, exclusive maximum, and the serverless field. */
export function unmetLegacyRequirements(
  file: { minServerVersion?: string; maxServerVersion?: string; serverless?: string },
  server: ServerInfo,
): string | undefined {
  const version = server.version.join('.');
  if (
    file.minServerVersion &&
    compareVersions(server.version, parseVersion(file.minServerVersion)) < 0
  ) {
    return `needs server >= ${file.minServerVersion}, have ${version}`;
  }
  if (
    file.maxServerVersion &&
    compareVersions(server.version, parseVersion(file.maxServerVersion)) >= 0
  ) {
    return `needs server < ${file.maxServerVersion}, have ${version}`;
  }
  if (file.serverless === 'require' && !server.serverless) return 'needs Atlas Serverless';
  if (file.serverless === 'forbid' && server.serverless) return 'forbids Atlas Serverless';
  return undefined;
}
