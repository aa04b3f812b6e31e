// The kernel's text listing of its IPVS table as ip_vs_info_seq_show writes it (Debian's 6.1
// kernel), for FakeIpvs: the shared contract (test/support/ipvs-listing-contract.ts) checks it
// line for line against the kernel's. Reading it: proc.ts. pure.
import { parseIPv6 } from '../model/addr.js';
import { FORWARD_METHODS, type IpvsTable, SvcFlag, type VirtualServer } from '../model/ipvs.js';
import { FORWARD_NAMES } from './proc.js';

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
