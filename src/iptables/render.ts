// The iptables + ipset path as text: iptables-restore payloads (nat, filter, mangle; per family) and an
// ipset-restore payload. pure: no I/O (a lint rule keeps it so); restore.ts runs the payloads.
// Semantics follow kube-proxy's IPVS mode (writeIptablesRules), in our own chains; the rules
// depend only on the configuration, every Service lives in a set. The chain layout and why the
// NodePort rule skips VIPs: docs/semantics.md ("The iptables path").
import type { Desired, SetEntry } from '../desired/types.js';
import type { ProxyConfig } from '../config/types.js';
import { type Family, canonicalIP, formatIp, parseCidr } from '../model/addr.js';
import { CHAINS, HOOKS, type Names, SETS, type SetSpec, type Table, makeNames } from './names.js';
import { type Saved, findChains, findJumps, jumpKey } from './save.js';

/** How to render the iptables payloads. */
export interface RenderOptions {
  /** Chain and set prefix; default IPVSOP. */
  prefix?: string;
  /** `MASQUERADE --random-fully` (iptables >= 1.6.2 on kernel >= 3.13); default true. */
  randomFully?: boolean;
  /** Hook jumps already in place (jumpKey), per family; the missing ones are inserted. Default: none. */
  presentJumps?: { v4?: ReadonlySet<string>; v6?: ReadonlySet<string> };
}

/** The masquerade mark for a bit, as iptables prints it (`14` -> `0x4000`). Throws outside 0..31. */
export function markOf(bit: number): string {
  if (!Number.isInteger(bit) || bit < 0 || bit > 31) throw new Error(`masqueradeBit ${bit} is not in 0..31`);
  return `0x${(2 ** bit).toString(16)}`;
}

/**
 * iptables-restore payloads for `--noflush`: our chains declared (so created or flushed, and only
 * those), their rules, and the hook jumps that are missing. Same text for any number of Services.
 */
export function renderIptables(config: ProxyConfig, opts: RenderOptions = {}): { v4: string; v6: string } {
  const names = makeNames(opts.prefix);
  return {
    v4: renderFamily('IPv4', config, names, opts, opts.presentJumps?.v4 ?? new Set()),
    v6: renderFamily('IPv6', config, names, opts, opts.presentJumps?.v6 ?? new Set()),
  };
}

function renderFamily(
  family: Family, config: ProxyConfig, names: Names, opts: RenderOptions, present: ReadonlySet<string>,
): string {
  const mark = markOf(config.masqueradeBit);
  const c = names.chain;
  const s = (suffix: string) => names.set(family, suffix);
  const match = (suffix: string, dirs: string) => `-m set --match-set ${s(suffix)} ${dirs}`;
  const cidrs = config.clusterCIDRs.map((t) => t.trim()).filter((t) => parseCidr(t)?.family === family);

  const nat = [
    `-A ${c('SERVICES')} ${match('CLUSTER-IP', 'dst,dst')} -j ${c('CLUSTER')}`,
    `-A ${c('SERVICES')} ${match('EXTERNAL-IP', 'dst,dst')} -j ${c('EXTERNAL')}`,
    `-A ${c('SERVICES')} ${match('LB', 'dst,dst')} -j ${c('EXTERNAL')}`,
    `-A ${c('SERVICES')} -m addrtype --dst-type LOCAL -m set ! --match-set ${s('VIPS')} dst -j ${c('NODE-PORT')}`,
    ...(config.masqueradeAll ? [] : cidrs.map((cidr) => `-A ${c('CLUSTER')} -s ${cidr} -j RETURN`)),
    ...(config.masqueradeAll || cidrs.length ? [`-A ${c('CLUSTER')} -j ${c('MARK-MASQ')}`] : []),
    `-A ${c('EXTERNAL')} ${match('EXTERNAL-IP-LOCAL', 'dst,dst')} -j RETURN`,
    `-A ${c('EXTERNAL')} ${match('LB-LOCAL', 'dst,dst')} -j RETURN`,
    `-A ${c('EXTERNAL')} -j ${c('MARK-MASQ')}`,
    ...(['tcp', 'udp'] as const).flatMap((p) => [
      `-A ${c('NODE-PORT')} -p ${p} ${match(`NP-LOCAL-${p.toUpperCase()}`, 'dst')} -j RETURN`,
      `-A ${c('NODE-PORT')} -p ${p} ${match(`NP-${p.toUpperCase()}`, 'dst')} -j ${c('MARK-MASQ')}`,
    ]),
    `-A ${c('NODE-PORT')} -p sctp ${match('NP-LOCAL-SCTP', 'dst,dst')} -j RETURN`,
    `-A ${c('NODE-PORT')} -p sctp ${match('NP-SCTP', 'dst,dst')} -j ${c('MARK-MASQ')}`,
    `-A ${c('MARK-MASQ')} -j MARK --or-mark ${mark}`,
    `-A ${c('POSTROUTING')} ${match('LOOP-BACK', 'dst,dst,src')} -j MASQUERADE`,
    `-A ${c('POSTROUTING')} -m mark ! --mark ${mark}/${mark} -j RETURN`,
    `-A ${c('POSTROUTING')} -j MARK --xor-mark ${mark}`,
    `-A ${c('POSTROUTING')} -j MASQUERADE${opts.randomFully === false ? '' : ' --random-fully'}`,
  ];
  const filter = [
    `-A ${c('INPUT')} ${match('LB-FW', 'dst,dst')} -j ${c('SOURCE-RANGES')}`,
    `-A ${c('INPUT')} ${match('CLUSTER-IP', 'dst,dst')} -j RETURN`,
    `-A ${c('INPUT')} ${match('EXTERNAL-IP', 'dst,dst')} -j RETURN`,
    `-A ${c('INPUT')} ${match('LB', 'dst,dst')} -j RETURN`,
    `-A ${c('INPUT')} -m conntrack --ctstate NEW ${match('VIPS', 'dst')} -j REJECT`,
    `-A ${c('SOURCE-RANGES')} ${match('LB-SRC-CIDR', 'dst,dst,src')} -j RETURN`,
    `-A ${c('SOURCE-RANGES')} ${match('LB-SRC-IP', 'dst,dst,src')} -j RETURN`,
    `-A ${c('SOURCE-RANGES')} -j DROP`,
    `-A ${c('FORWARD')} -m mark --mark ${mark}/${mark} -j ACCEPT`,
    // IPVS sees replies in FORWARD after the filter table: without this, a DROP policy eats them.
    `-A ${c('FORWARD')} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
  ];
  // A new connection's SYN to a virtual server whose scheduler is being swapped: dropped, so the
  // client sends it again after the swap instead of meeting the kernel's port unreachable.
  const mangle = [`-A ${c('HOLD')} -p tcp -m tcp --syn ${match('HOLD', 'dst,dst')} -j DROP`];
  const table = (t: Table, rules: string[]) => [
    `*${t}`,
    ...CHAINS[t].map((suffix) => `:${c(suffix)} - [0:0]`),
    ...HOOKS.filter((h) => h.table === t && !present.has(jumpKey(t, h.builtin, c(h.target))))
      .map((h) => `-I ${h.builtin} -m comment --comment "${h.comment}" -j ${c(h.target)}`),
    ...rules,
    'COMMIT',
  ];
  return [...table('nat', nat), ...table('filter', filter), ...table('mangle', mangle), ''].join('\n');
}

/** How to render the ipset payload. */
export interface IpsetRenderOptions {
  prefix?: string;
  /**
   * Set names that exist now (`ipset list -n`): live sets are created only when missing, stale
   * `-tmp` ones destroyed first.
   */
  existing?: ReadonlySet<string>;
  /** Families to render; default both. */
  families?: readonly Family[];
}

/** One set of ours as the desired state fills it. */
export interface WantedSet {
  name: string;
  spec: SetSpec;
  family: Family;
  /** Members in the kernel's printed form (as `ipset save` shows them), deduplicated. */
  members: string[];
}

/** Every set of ours for `families` (default both), in SETS order, with its members. */
export function desiredSets(desired: Pick<Desired, 'sets' | 'vips'>, opts: IpsetRenderOptions = {}): WantedSet[] {
  const names = makeNames(opts.prefix);
  const entries = collectEntries(desired);
  return (opts.families ?? ['IPv4', 'IPv6'] as const).flatMap((family) => SETS.map((spec) => ({
    name: names.set(family, spec.suffix), spec, family, members: entries.get(`${family} ${spec.suffix}`) ?? [],
  })));
}

/**
 * ipset-restore payload replacing the content of every set we own: each filled as `<name>-tmp`,
 * then swapped in (atomic: the rules never see a half-filled set) and the old content destroyed.
 * Run with `ipset restore -exist`. IptablesRestore applies differences instead (ipset-plan.ts);
 * this whole form is the drift check's count and the plan's fallback.
 */
export function renderIpsets(desired: Pick<Desired, 'sets' | 'vips'>, opts: IpsetRenderOptions = {}): string {
  const existing = opts.existing ?? new Set<string>();
  const lines: string[] = [];
  for (const { name, spec, family, members } of desiredSets(desired, opts)) {
    const tmp = `${name}-tmp`;
    if (!existing.has(name)) lines.push(`create ${name} ${createArgs(spec, family, 0)}`);
    if (existing.has(tmp)) lines.push(`destroy ${tmp}`);
    lines.push(`create ${tmp} ${createArgs(spec, family, members.length)}`);
    for (const m of members) lines.push(`add ${tmp} ${m}`);
    lines.push(`swap ${tmp} ${name}`, `destroy ${tmp}`);
  }
  return lines.length ? `${lines.join('\n')}\n` : '';
}

/** `create` arguments after the name: hash sets sized for at least `size` members (maxelem >= 65536). */
export function createArgs(spec: SetSpec, family: Family, size: number): string {
  if (spec.type === 'bitmap:port') return `bitmap:port range ${PORT_RANGE}`;
  const maxelem = Math.max(65536, size);
  return `${spec.type} family ${family === 'IPv6' ? 'inet6' : 'inet'} hashsize 1024 maxelem ${maxelem}`;
}

/** The range our bitmap:port sets cover, as `ipset save` prints it. */
export const PORT_RANGE = '0-65535';

/** Members per `<family> <suffix>`, deduplicated, in desired order (sorted); VIPS sorted. */
function collectEntries(desired: Pick<Desired, 'sets' | 'vips'>): Map<string, string[]> {
  const bySet = new Map<string, Set<string>>();
  const add = (key: string, member: string) => {
    let m = bySet.get(key);
    if (!m) bySet.set(key, (m = new Set()));
    m.add(member);
  };
  const suffixOf = new Map(SETS.filter((s) => s.from).map((s) => [s.from!, s]));
  for (const e of desired.sets) {
    const spec = suffixOf.get(e.set);
    if (!spec) continue;
    for (const m of members(spec, e)) add(`${e.family} ${spec.suffix}`, m);
  }
  for (const vip of [...desired.vips].sort()) add(`${vip.includes(':') ? 'IPv6' : 'IPv4'} VIPS`, ip(vip));
  return new Map([...bySet].map(([k, v]) => [k, [...v]]));
}

/**
 * Members of each family's VIPS set for these VIPs, counted as collectEntries fills them (each
 * address in the kernel's form, once), without sorting them: the drift check's count.
 */
export function vipSetCounts(
  vips: Iterable<string>, families: readonly Family[], prefix?: string,
): Map<string, number> {
  const names = makeNames(prefix);
  const seen: Record<Family, Set<string>> = { IPv4: new Set(), IPv6: new Set() };
  for (const vip of vips) seen[vip.includes(':') ? 'IPv6' : 'IPv4'].add(ip(vip));
  return new Map(families.map((f) => [names.set(f, 'VIPS'), seen[f].size] as const));
}

/**
 * ipset members for one entry, in the form `ipset save` prints them (lab VM, ipset 7.17): IPv6
 * compressed, a net's host bits cleared and a full-length prefix (/32, /128) left out. A /0
 * source range becomes two /1 halves (hash:net types refuse /0).
 */
function members(spec: SetSpec, e: SetEntry): string[] {
  const ipPort = `${ip(e.address ?? '')},${e.protocol.toLowerCase()}:${e.port}`;
  switch (spec.type) {
    case 'bitmap:port': return [`${e.port}`];
    case 'hash:ip': return [ip(e.address ?? '')];
    case 'hash:ip,port': return [ipPort];
    case 'hash:ip,port,ip': return [`${ipPort},${ip(e.source ?? e.address ?? '')}`];
    case 'hash:ip,port,net': {
      const cidr = e.cidr ?? '';
      if (parseCidr(cidr)?.prefix !== 0) return [`${ipPort},${net(cidr)}`];
      return e.family === 'IPv6'
        ? [`${ipPort},::/1`, `${ipPort},8000::/1`]
        : [`${ipPort},0.0.0.0/1`, `${ipPort},128.0.0.0/1`];
    }
  }
}

/** An address as the kernel prints it; text that is no address stays as it is (ipset refuses it). */
const ip = (text: string) => (IPV4.test(text) ? text : canonicalIP(text) ?? text);
/** A dotted quad already in canonical form (no leading zeros): most members, kept without parsing. */
const IPV4 = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;

/** A net as the kernel prints it: host bits cleared, no suffix for a full-length prefix. */
function net(text: string): string {
  const c = parseCidr(text);
  if (!c) return ip(text);
  const bits = c.family === 'IPv4' ? 32 : 128;
  const base = formatIp({ family: c.family, value: c.base << BigInt(bits - c.prefix) });
  return c.prefix === bits ? base : `${base}/${c.prefix}`;
}

/** iptables-restore payload (for `--noflush`) emptying our chains (declared: created or flushed), nothing else. */
export function renderChainFlush(prefix?: string): string {
  const c = makeNames(prefix).chain;
  const tables = (Object.keys(CHAINS) as Table[])
    .flatMap((t) => [`*${t}`, ...CHAINS[t].map((x) => `:${c(x)} - [0:0]`), 'COMMIT']);
  return `${tables.join('\n')}\n`;
}

/**
 * iptables-restore payload (for `--noflush`) removing what we own in one family's dump: our hook
 * jumps (each occurrence deleted verbatim), then our chains (flushed, deleted). '' when nothing of ours is there.
 */
export function renderCleanup(saved: Saved, prefix?: string): string {
  const names = makeNames(prefix);
  const jumps = findJumps(saved, names);
  const chains = findChains(saved, names);
  const out: string[] = [];
  for (const t of Object.keys(CHAINS) as Table[]) {
    const dels = HOOKS.filter((h) => h.table === t)
      .flatMap((h) => jumps.get(jumpKey(t, h.builtin, names.chain(h.target))) ?? [])
      .map((r) => `-D ${r.slice(3)}`);
    if (!dels.length && !chains[t].length) continue;
    out.push(`*${t}`, ...dels, ...chains[t].map((ch) => `:${ch} - [0:0]`), ...chains[t].map((ch) => `-X ${ch}`),
      'COMMIT');
  }
  return out.length ? `${out.join('\n')}\n` : '';
}

/** ipset-restore payload destroying our sets among `existing` (after the rules using them are gone). */
export function renderIpsetCleanup(existing: ReadonlySet<string>, prefix?: string): string {
  const ours = makeNames(prefix).allSets().filter((n) => existing.has(n));
  return ours.length ? `${ours.map((n) => `destroy ${n}`).join('\n')}\n` : '';
}
