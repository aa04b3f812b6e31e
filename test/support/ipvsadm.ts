// ipvsadm as an independent oracle: run it, and parse what it prints into the project's model
// values so a whole table can be compared with what our client wrote or dumped. Only for tests in
// the lab VM. ipvsadm's output is merged from several listings, because each shows other columns:
//   -Ln --exact            scheduler, flags, persistence, forwarding, weight, active/inactive conns
//   -Ln --thresholds       upper/lower thresholds
//   -Ln --persistent-conn  persistent connection counts
//   -Ln --tun-info         tunnel type/port/checksum flags
//   -Ln --stats --exact    conns, packets and bytes
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import {
  type ForwardMethod, type RealServer, type TunnelType, type VirtualServer, SvcFlag, makeRealServer, makeVirtualServer,
  virtualServerKey,
} from '../../src/model/ipvs.js';
import { parseIPv4 } from '../../src/model/addr.js';

/** Runs ipvsadm with the arguments and returns what it printed. */
export function ipvsadm(...args: string[]): string {
  return execFileSync('ipvsadm', args, { encoding: 'utf8' });
}

/** Feeds a `-R` restore script (one rule per line) to ipvsadm. */
/**
 * Empties IPVS and loads it again (with `schedulers`): the only way to empty the kernel's trash of
 * deleted real servers, which every add-dest walks (see bench/guest.ts freshIpvs). A client opened
 * before must be opened again: the family gets a new id.
 */
export function reloadIpvs(schedulers: readonly string[] = ['rr']): void {
  execFileSync('ipvsadm', ['-C']);
  const mods = readdirSync('/sys/module').filter((m) => m.startsWith('ip_vs'));
  if (mods.length) execFileSync('modprobe', ['-r', ...mods.filter((m) => m !== 'ip_vs'), ...(mods.includes('ip_vs') ? ['ip_vs'] : [])]);
  execFileSync('modprobe', ['ip_vs']);
  for (const s of schedulers) execFileSync('modprobe', [`ip_vs_${s}`]);
}

export function ipvsadmRestore(script: string): void {
  execFileSync('ipvsadm', ['-R'], { input: script, encoding: 'utf8' });
}

/** A virtual server as ipvsadm shows it, with its real servers. */
export interface ListedService {
  vs: VirtualServer;
  dests: RealServer[];
}

const forwardOf: Record<string, ForwardMethod> = { Masq: 'masq', Local: 'local', Tunnel: 'tunnel', Route: 'route', Bypass: 'bypass' };

function splitHostPort(s: string): [string, number] {
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(s);
  if (!m) throw new Error(`ipvsadm: cannot read address ${s}`);
  return [m[1]!, Number(m[2])];
}

function maskOf(text: string, family: 'IPv4' | 'IPv6'): number {
  if (family === 'IPv6') return Number(text);
  const b = parseIPv4(text);
  if (!b) throw new Error(`ipvsadm: cannot read mask ${text}`);
  return ((b[0]! << 24) | (b[1]! << 16) | (b[2]! << 8) | b[3]!) >>> 0;
}

/** Service lines of any -Ln listing in order, each with the columns of its destination lines. */
function walk(text: string): Array<{ vs: VirtualServer; rows: string[][] }> {
  const out: Array<{ vs: VirtualServer; rows: string[][] }> = [];
  for (const line of text.split('\n')) {
    if (/^(TCP|UDP|SCTP|FWM)\s/.test(line)) {
      out.push({ vs: parseServiceLine(line), rows: [] });
    } else if (/^\s+->\s+[^R]/.test(line)) {
      const svc = out[out.length - 1];
      if (!svc) throw new Error(`ipvsadm: destination before any service: ${line}`);
      svc.rows.push(line.trim().split(/\s+/).slice(1));
    }
  }
  return out;
}

/** Reads a service line of `-Ln` (scheduler and flags), e.g. `TCP  [fd00::1]:80 sh (sh-fallback,sh-port) persistent 300 mask 64`. */
function parseServiceLine(line: string): VirtualServer {
  const t = line.trim().split(/\s+/);
  let i = 0;
  const proto = t[i++]!;
  let vs: VirtualServer;
  if (proto === 'FWM') {
    const fwmark = Number(t[i++]);
    const family = t[i] === 'IPv6' ? (i++, 'IPv6' as const) : ('IPv4' as const);
    vs = makeVirtualServer({ family, fwmark });
  } else {
    const [address, port] = splitHostPort(t[i++]!);
    vs = makeVirtualServer({ family: address.includes(':') ? 'IPv6' : 'IPv4', protocol: proto as VirtualServer['protocol'], address, port });
  }
  if (t[i] === undefined) return vs; // a -Ln --stats line has no scheduler
  vs.scheduler = t[i++]!;
  while (i < t.length) {
    const tok = t[i++]!;
    if (tok.startsWith('(')) {
      for (const f of tok.replace(/[()]/g, '').split(',')) {
        if (/fallback|flag-1/.test(f)) vs.flags |= SvcFlag.SCHED1;
        else if (/port|flag-2/.test(f)) vs.flags |= SvcFlag.SCHED2;
        else if (/flag-3/.test(f)) vs.flags |= SvcFlag.SCHED3;
      }
    } else if (tok === 'persistent') {
      vs.flags |= SvcFlag.PERSISTENT;
      vs.timeout = Number(t[i++]);
    } else if (tok === 'mask') {
      vs.netmask = maskOf(t[i++]!, vs.family);
    } else if (tok === 'pe') {
      vs.peName = t[i++]!;
    } else if (tok === 'ops') {
      vs.flags |= SvcFlag.ONEPACKET;
    }
  }
  return vs;
}

/** The whole table as ipvsadm sees it, merged from its listings (counters included). */
export function ipvsadmTable(): ListedService[] {
  const main: ListedService[] = walk(ipvsadm('-Ln', '--exact')).map(({ vs, rows }) => ({
    vs,
    dests: rows.map((c) => {
      const [address, port] = splitHostPort(c[0]!);
      return makeRealServer({
        address, port, forward: forwardOf[c[1]!]!, weight: Number(c[2]), activeConns: Number(c[3]), inactiveConns: Number(c[4]),
      });
    }),
  }));
  // The other listings print the same services and destinations in the same order.
  const merge = (text: string, fn: (rs: RealServer, cols: string[]) => void) => {
    walk(text).forEach(({ rows }, i) => rows.forEach((c, j) => fn(main[i]!.dests[j]!, c)));
  };
  merge(ipvsadm('-Ln', '--thresholds'), (rs, c) => { rs.upperThreshold = Number(c[1]); rs.lowerThreshold = Number(c[2]); });
  merge(ipvsadm('-Ln', '--persistent-conn'), (rs, c) => { rs.persistentConns = Number(c[2]); });
  merge(ipvsadm('-Ln', '--tun-info'), (rs, c) => {
    const info = c[2]!;
    if (info === 'n/a') return;
    const parts = info.split(':');
    rs.tunnelType = parts[0] as TunnelType;
    // gue:PORT:(+c|-c|r), gre:(+c|-c|r); flag bits IP_VS_TUNNEL_ENCAP_FLAG_{CSUM=1,REMCSUM=2}
    if (rs.tunnelType === 'gue') rs.tunnelPort = Number(parts[1]);
    const f = parts[parts.length - 1]!;
    rs.tunnelFlags = f === '+c' ? 1 : f === 'r' ? 2 : 0;
  });
  return main;
}

/** Per service key: [conns, inPkts, outPkts, inBytes, outBytes] of the service and of each dest. */
export function ipvsadmStats(): Map<string, { service: bigint[]; dests: Map<string, bigint[]> }> {
  const out = new Map<string, { service: bigint[]; dests: Map<string, bigint[]> }>();
  let current: { service: bigint[]; dests: Map<string, bigint[]> } | undefined;
  for (const line of ipvsadm('-Ln', '--stats', '--exact').split('\n')) {
    const t = line.trim().split(/\s+/);
    if (/^(TCP|UDP|SCTP|FWM)\s/.test(line)) {
      const nums = t.slice(-5).map((x) => BigInt(x));
      const vs = parseServiceLine(t.slice(0, -5).join(' '));
      current = { service: nums, dests: new Map() };
      out.set(virtualServerKey(vs), current);
    } else if (t[0] === '->' && current && t.length === 7) {
      current.dests.set(t[1]!.replace(/^\[|\](?=:)/g, ''), t.slice(2).map((x) => BigInt(x)));
    }
  }
  return out;
}

/** The table as ipvsadm shows it, one line per virtual server: `TCP 10.200.1.30:80 rr -> a:80 w=1, b:80 w=1`. */
export function ipvsadmLines(): string[] {
  return ipvsadmTable().map(({ vs, dests }) =>
    `${vs.protocol} ${vs.address}:${vs.port} ${vs.scheduler} -> ${dests.map((d) => `${d.address}:${d.port} w=${d.weight}`).sort().join(', ')}`).sort();
}
