// The kernel's text listing of its IPVS table, /proc/net/ip_vs (ip_vs_ctl.c ip_vs_info_seq_show):
// every virtual server of the reader's network namespace with its real servers, in one read. The
// generic netlink API has no such read: its real servers come one GET_DEST dump per virtual server,
// 36 000 dumps at 30 000 Services. The listing shows a real server's address, port, forwarding
// method, weight and connections, not its thresholds nor its tunnel settings; and a firewall-mark
// line names no address family. So a full read takes from it only what it shows in full
// (table-cache.ts). pure, but for readProcListing.
import { readFile } from 'node:fs/promises';
import { canonicalIP, parseIPv6 } from '../model/addr.js';
import {
  FORWARD_METHODS, type ForwardMethod, type IpvsTable, type Protocol, type RealServer, SvcFlag, type VirtualServer,
  virtualServerKey,
} from '../model/ipvs.js';

/** Where the kernel lists the reader's IPVS table. */
export const PROC_IPVS = '/proc/net/ip_vs';

/** The kernel's names of the forwarding methods (ip_vs_fwd_name), in FORWARD_METHODS' order. */
const FORWARD_NAMES = ['Masq', 'Local', 'Tunnel', 'Route', 'Bypass'] as const;
const PROTOCOLS: ReadonlySet<string> = new Set<Protocol>(['TCP', 'UDP', 'SCTP']);

const SERVICE_LINE = /^(\S+) {2}(?:([0-9A-F]{8})|\[([0-9a-f:]+)\]):([0-9A-F]{4}) \S+/;
const DEST_LINE = /^ {2}-> (?:([0-9A-F]{8})|\[([0-9a-f:]+)\]):([0-9A-F]{4}) +(\S+) +(-?\d+) +(-?\d+) +(-?\d+) *$/;

/**
 * The three header lines the kernel writes before the table. Then, as Debian's 6.1 kernel lists
 * (trailing spaces left out):
 *   TCP  0A000001:0050 rr
 *     -> 0A010001:1F90      Masq    3      0          0
 *   UDP  0A000002:0035 sh ops
 *   TCP  [2001:0db8:0000:0000:0000:0000:0000:0001]:0050 lc persistent 15000 80000000
 *   FWM  00000011 rr
 */
const HEADER = /^(IP Virtual Server version |Prot LocalAddress:Port | {2}-> RemoteAddress:Port )/;

/**
 * The real servers of each address-keyed virtual server of the listing, by virtualServerKey, with
 * what the listing shows (address, port, weight, forwarding method, active and inactive
 * connections); thresholds and tunnel settings are the defaults, persistent connections unknown.
 * A firewall-mark virtual server, a protocol or a line it cannot read, and a key listed twice leave
 * that virtual server out: its caller reads it another way.
 */
export function parseProcListing(text: string): Map<string, RealServer[]> {
  const out = new Map<string, RealServer[]>();
  const spoiled = new Set<string>();
  let current: RealServer[] | undefined;
  let key: string | undefined;
  for (const line of text.split('\n')) {
    if (line === '' || HEADER.test(line)) continue;
    if (line.startsWith('  -> ')) {
      const dest = DEST_LINE.exec(line);
      const rs = dest ? realServerOf(dest) : undefined;
      if (rs && current) current.push(rs);
      else if (key !== undefined) spoiled.add(key);
      continue;
    }
    key = serviceKeyOf(line);
    current = undefined;
    if (key === undefined) continue;
    if (out.has(key)) spoiled.add(key);
    else out.set(key, current = []);
  }
  for (const k of spoiled) out.delete(k);
  return out;
}

/** The key of a service line; undefined for firewall marks, other protocols and lines it cannot read. */
function serviceKeyOf(line: string): string | undefined {
  const m = SERVICE_LINE.exec(line);
  if (!m || !PROTOCOLS.has(m[1]!)) return undefined;
  const address = addressOf(m[2], m[3]);
  if (address === undefined) return undefined;
  return virtualServerKey({
    family: m[3] ? 'IPv6' : 'IPv4', protocol: m[1] as Protocol, address, port: parseInt(m[4]!, 16), fwmark: 0,
    scheduler: '', flags: 0, timeout: 0, netmask: 0, peName: '',
  });
}

function realServerOf(m: RegExpExecArray): RealServer | undefined {
  const address = addressOf(m[1], m[2]);
  const i = FORWARD_NAMES.indexOf(m[4] as (typeof FORWARD_NAMES)[number]);
  const [weight, activeConns, inactiveConns] = [Number(m[5]), Number(m[6]), Number(m[7])];
  const numbers = [weight, activeConns, inactiveConns];
  if (address === undefined || i < 0 || !numbers.every(Number.isSafeInteger)) return undefined;
  // Every field in one literal, in decode.ts's order: the same shape as a dumped real server.
  return {
    address, port: parseInt(m[3]!, 16), family: m[2] === undefined ? 'IPv4' : 'IPv6', weight,
    forward: FORWARD_METHODS[i] as ForwardMethod, upperThreshold: 0, lowerThreshold: 0, tunnelType: 'ipip',
    tunnelPort: 0, tunnelFlags: 0, activeConns, inactiveConns, persistentConns: undefined,
  };
}

/** An address as the netlink decoder gives it, from the listing's hex (IPv4) or %pI6 (IPv6) form. */
function addressOf(hex: string | undefined, v6: string | undefined): string | undefined {
  if (v6 !== undefined) return canonicalIP(v6);
  if (hex === undefined) return undefined;
  const n = parseInt(hex, 16);
  return [n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff].join('.');
}

/** A table as the kernel lists it (the FakeIpvs's listing), address-keyed and mark-keyed alike. */
export function formatProcListing(table: IpvsTable): string {
  const lines = [
    'IP Virtual Server version 1.2.1 (size=4096)',
    'Prot LocalAddress:Port Scheduler Flags',
    '  -> RemoteAddress:Port Forward Weight ActiveConn InActConn',
  ];
  for (const { vs, dests } of table.values()) {
    lines.push(serviceLine(vs));
    for (const rs of [...dests.values()].reverse()) { // the kernel adds a real server at its list's head
      const fwd = FORWARD_NAMES[FORWARD_METHODS.indexOf(rs.forward)]!;
      lines.push(`  -> ${listed(rs.address)}:${hex(rs.port, 4)}      ${fwd.padEnd(7)} ${String(rs.weight).padEnd(6)} `
        + `${String(rs.activeConns ?? 0).padEnd(10)} ${String(rs.inactiveConns ?? 0).padEnd(10)}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

/** ip_vs_info_seq_show's line of a virtual server (timeout in jiffies at HZ 250, Debian's). */
function serviceLine(vs: VirtualServer): string {
  const ops = vs.flags & SvcFlag.ONEPACKET ? 'ops ' : '';
  const head = vs.fwmark ? `FWM  ${hex(vs.fwmark, 8)} ${vs.scheduler} ${ops}`
    : vs.family === 'IPv6' ? `${vs.protocol}  ${listed(vs.address)}:${hex(vs.port, 4)} ${vs.scheduler} `
      : `${vs.protocol}  ${listed(vs.address)}:${hex(vs.port, 4)} ${vs.scheduler} ${ops} `;
  if (!(vs.flags & SvcFlag.PERSISTENT)) return head;
  // The kernel prints ntohl(netmask): an IPv6 prefix length comes out byte-swapped.
  const m = vs.family === 'IPv6' ? (vs.netmask & 0xff) * 0x1000000 : vs.netmask;
  return `${head}persistent ${vs.timeout * 250} ${hex(m, 8)}`;
}

function hex(n: number, width: number): string {
  return n.toString(16).toUpperCase().padStart(width, '0');
}

/** An address in the listing's form: 8 hex digits for IPv4, every IPv6 group in full within brackets. */
function listed(address: string): string {
  if (!address.includes(':')) return hex(address.split('.').reduce((n, b) => n * 256 + Number(b), 0), 8);
  const b = parseIPv6(address) ?? new Uint8Array(16);
  const groups = Array.from({ length: 8 }, (_, i) => hex(b[2 * i]! * 256 + b[2 * i + 1]!, 4).toLowerCase());
  return `[${groups.join(':')}]`;
}

/** The listing's text; undefined where the kernel offers none (no ip_vs, no /proc) or it cannot be read. */
export async function readProcListing(path = PROC_IPVS): Promise<string | undefined> {
  try {
    return await readFile(path, 'latin1');
  } catch {
    return undefined;
  }
}
