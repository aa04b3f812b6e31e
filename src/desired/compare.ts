// Equality and one-line forms DesiredState uses to tell what a rebuilt Service changed. pure.
import { realServerEqual, virtualServerEqual, virtualServerKey } from '../model/ipvs.js';
import type { DesiredVirtualServer, SetEntry } from './types.js';
import type { HealthCheck } from './health-checks.js';

/** One-line form of a set entry, e.g. `KUBE-CLUSTER-IP IPv4 TCP 10.200.1.10:80`. */
export function formatSetEntry(s: SetEntry): string {
  const where = s.address === undefined ? `${s.port}`
    : s.address.includes(':') ? `[${s.address}]:${s.port}` : `${s.address}:${s.port}`;
  const from = s.cidr ?? s.source;
  return `${s.set} ${s.family} ${s.protocol} ${where}${from ? ` from ${from}` : ''}`;
}

/** Same set entries in the same order (a rebuilt Service whose sets did not change). */
export function sameSets(a: readonly SetEntry[] | undefined, b: readonly SetEntry[] | undefined): boolean {
  if (!a?.length || !b?.length) return !a?.length && !b?.length;
  return a.length === b.length && a.every((x, i) => formatSetEntry(x) === formatSetEntry(b[i]!));
}

export function sameHealthCheck(a: HealthCheck | undefined, b: HealthCheck | undefined): boolean {
  return a === b || (a !== undefined && b !== undefined && a.port === b.port && a.localEndpoints === b.localEndpoints
    && a.namespace === b.namespace && a.name === b.name);
}

export function cmpId(a: { namespace: string; name: string }, b: { namespace: string; name: string }): number {
  const x = `${a.namespace}/${a.name}`;
  const y = `${b.namespace}/${b.name}`;
  return x < y ? -1 : x > y ? 1 : 0;
}

export function keyOf(d: DesiredVirtualServer): string {
  return virtualServerKey(d.vs);
}

/** Same virtual server, real servers and origin: a rebuilt entry that changed nothing here. */
export function sameDesired(a: DesiredVirtualServer, b: DesiredVirtualServer): boolean {
  return virtualServerEqual(a.vs, b.vs) && a.vs.timeout === b.vs.timeout && a.vs.netmask === b.vs.netmask
    && a.dests.length === b.dests.length && a.dests.every((r, i) => realServerEqual(r, b.dests[i]!))
    && a.slowStartMs === b.slowStartMs && a.clusterBalance === b.clusterBalance
    && a.origin.kind === b.origin.kind && a.origin.portName === b.origin.portName
    && a.origin.plugin === b.origin.plugin && a.origin.name === b.origin.name
    && a.origin.namespace === b.origin.namespace;
}
