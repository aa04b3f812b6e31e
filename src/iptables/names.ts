// The names the iptables path owns: our chains per table, the built-in chains that jump to them,
// and our ipsets with their kernel types and the kube-proxy set each one carries. Everything we
// ever create or delete is listed here, so ownership is "a name in these lists", never "a name
// that looks like ours". pure: no I/O.
import type { Family } from '../model/addr.js';
import type { SetName } from '../desired/types.js';

/** Default prefix of chains and sets. */
export const DEFAULT_PREFIX = 'IPVSOP';

/**
 * Checks a prefix: upper-case letters and digits, at most 8 characters, so that the longest set
 * name (`<prefix>6-EXTERNAL-IP-LOCAL-tmp`, 31) fits ipset's 31 characters and every chain name
 * fits iptables' 28.
 */
export function checkPrefix(prefix: string): string {
  if (!/^[A-Z][A-Z0-9]{0,7}$/.test(prefix)) {
    throw new Error(`iptables: bad chain/set prefix ${JSON.stringify(prefix)} (use [A-Z0-9], 1-8 characters)`);
  }
  return prefix;
}

export type Table = 'nat' | 'filter' | 'mangle';

/** Our chains (suffixes after `<prefix>-`), by table, in declaration order. */
export const CHAINS: Readonly<Record<Table, readonly string[]>> = {
  nat: ['SERVICES', 'CLUSTER', 'EXTERNAL', 'NODE-PORT', 'MARK-MASQ', 'POSTROUTING'],
  filter: ['INPUT', 'SOURCE-RANGES', 'FORWARD'],
  // Before IPVS on both of its paths (mangle runs at -150, IPVS at -98 on OUTPUT and +99 on INPUT): the SYN hold.
  mangle: ['HOLD'],
};

/** One jump from a built-in chain into ours. */
export interface Hook {
  table: Table;
  builtin: string;
  /** Our chain suffix. */
  target: string;
  comment: string;
}

/** The only rules we add to chains we do not own: one jump each, inserted first. */
export const HOOKS: readonly Hook[] = [
  { table: 'nat', builtin: 'PREROUTING', target: 'SERVICES', comment: 'ipvs-operator service portals' },
  { table: 'nat', builtin: 'OUTPUT', target: 'SERVICES', comment: 'ipvs-operator service portals' },
  { table: 'nat', builtin: 'POSTROUTING', target: 'POSTROUTING', comment: 'ipvs-operator postrouting rules' },
  { table: 'filter', builtin: 'INPUT', target: 'INPUT', comment: 'ipvs-operator VIP filter and source ranges' },
  { table: 'filter', builtin: 'FORWARD', target: 'FORWARD', comment: 'ipvs-operator forwarding rules' },
  { table: 'mangle', builtin: 'PREROUTING', target: 'HOLD', comment: 'ipvs-operator SYN hold' },
  { table: 'mangle', builtin: 'OUTPUT', target: 'HOLD', comment: 'ipvs-operator SYN hold' },
];

export type SetType = 'hash:ip' | 'hash:ip,port' | 'hash:ip,port,ip' | 'hash:ip,port,net' | 'bitmap:port';

/** One of our sets: name suffix, kernel type, and which desired entries fill it. */
export interface SetSpec {
  suffix: string;
  type: SetType;
  /** The kube-proxy set whose entries it holds; undefined for VIPS (filled from desired.vips) and HOLD. */
  from?: SetName;
}

/** Every set we own, per family (kube-proxy's IPVS-mode sets, shorter names). */
export const SETS: readonly SetSpec[] = [
  { suffix: 'CLUSTER-IP', type: 'hash:ip,port', from: 'KUBE-CLUSTER-IP' },
  { suffix: 'EXTERNAL-IP', type: 'hash:ip,port', from: 'KUBE-EXTERNAL-IP' },
  { suffix: 'EXTERNAL-IP-LOCAL', type: 'hash:ip,port', from: 'KUBE-EXTERNAL-IP-LOCAL' },
  { suffix: 'LB', type: 'hash:ip,port', from: 'KUBE-LOAD-BALANCER' },
  { suffix: 'LB-LOCAL', type: 'hash:ip,port', from: 'KUBE-LOAD-BALANCER-LOCAL' },
  { suffix: 'LB-FW', type: 'hash:ip,port', from: 'KUBE-LOAD-BALANCER-FW' },
  { suffix: 'LB-SRC-CIDR', type: 'hash:ip,port,net', from: 'KUBE-LOAD-BALANCER-SOURCE-CIDR' },
  { suffix: 'LB-SRC-IP', type: 'hash:ip,port,ip', from: 'KUBE-LOAD-BALANCER-SOURCE-IP' },
  { suffix: 'NP-TCP', type: 'bitmap:port', from: 'KUBE-NODE-PORT-TCP' },
  { suffix: 'NP-UDP', type: 'bitmap:port', from: 'KUBE-NODE-PORT-UDP' },
  { suffix: 'NP-SCTP', type: 'hash:ip,port', from: 'KUBE-NODE-PORT-SCTP-HASH' },
  { suffix: 'NP-LOCAL-TCP', type: 'bitmap:port', from: 'KUBE-NODE-PORT-LOCAL-TCP' },
  { suffix: 'NP-LOCAL-UDP', type: 'bitmap:port', from: 'KUBE-NODE-PORT-LOCAL-UDP' },
  { suffix: 'NP-LOCAL-SCTP', type: 'hash:ip,port', from: 'KUBE-NODE-PORT-LOCAL-SCTP-HASH' },
  { suffix: 'LOOP-BACK', type: 'hash:ip,port,ip', from: 'KUBE-LOOP-BACK' },
  { suffix: 'VIPS', type: 'hash:ip' },
  // Filled only while a virtual server's scheduler is swapped (syn-hold.ts); empty otherwise.
  { suffix: 'HOLD', type: 'hash:ip,port' },
];

/** Our naming for one prefix: chain and set names per family. */
export interface Names {
  prefix: string;
  /** `<prefix>-<suffix>`: chain names are per table and family already (ip6tables has its own). */
  chain(suffix: string): string;
  /** `<prefix>-<suffix>` for IPv4, `<prefix>6-<suffix>` for IPv6 (ipset names are global). */
  set(family: Family, suffix: string): string;
  /** Every set name we may create, both families, with the `-tmp` twins. */
  allSets(): string[];
}

/** Names for a prefix (checked). */
export function makeNames(prefix: string = DEFAULT_PREFIX): Names {
  checkPrefix(prefix);
  const set = (family: Family, suffix: string) => `${prefix}${family === 'IPv6' ? '6' : ''}-${suffix}`;
  return {
    prefix,
    chain: (suffix) => `${prefix}-${suffix}`,
    set,
    allSets: () =>
      (['IPv4', 'IPv6'] as const).flatMap((f) => SETS.flatMap((s) => [set(f, s.suffix), `${set(f, s.suffix)}-tmp`])),
  };
}
