// rtnetlink address requests, encoded by hand so that many can go in one datagram (src/rtnl/socket.ts).
// pure: no I/O. Layout (<linux/if_addr.h>, <linux/rtnetlink.h>):
//
//   nlmsghdr (16)  len | type RTM_NEWADDR/RTM_DELADDR | flags | seq | port
//   ifaddrmsg (8)  family u8 | prefixlen u8 | flags u8 | scope u8 | index u32
//   IFA_LOCAL      4 or 16 address bytes
//   IFA_ADDRESS    the same bytes (a /32 or /128 has no peer: iproute2 sends both, so do we)
import { NLMSG_HDRLEN, NLM_F_ACK, NLM_F_REQUEST } from '../netlink/constants.js';
import { parseIPv4, parseIPv6 } from '../model/addr.js';
import { nla } from '../netlink/framing.js';
import { RtnlError } from './errors.js';

export const RTM_NEWADDR = 20;
export const RTM_DELADDR = 21;
const IFA_ADDRESS = 1;
const IFA_LOCAL = 2;
const IFA_F_NODAD = 0x02;
const NLM_F_EXCL = 0x200;
const NLM_F_CREATE = 0x400;
const AF_INET = 2;
const AF_INET6 = 10;
const IFADDRMSG_LEN = 8;
const RT_SCOPE_UNIVERSE = 0;

/** An address as the kernel takes it: family, bytes, host prefix (/32 or /128). */
export interface HostAddress {
  family: number;
  bytes: Buffer;
  prefix: number;
}

/** `address` as a host route (/32, /128); RtnlError.invalidArgument (code EINVALARG) for anything but an IP. */
export function parseHostAddress(op: string, address: string): HostAddress {
  const v4 = parseIPv4(address);
  if (v4) return { family: AF_INET, bytes: Buffer.from(v4), prefix: 32 };
  const v6 = parseIPv6(address);
  if (v6) return { family: AF_INET6, bytes: Buffer.from(v6), prefix: 128 };
  throw RtnlError.invalidArgument(op, `${JSON.stringify(address)} is not an IP address`);
}

/**
 * RTM_NEWADDR (`add`: create, exclusive, so EEXIST when present; IPv6 without duplicate address
 * detection, scope universe as kube-proxy's kube-ipvs0 addresses) or RTM_DELADDR (`del`:
 * EADDRNOTAVAIL when absent) of `a` on link `index`, with an ACK requested.
 */
export function encodeAddrRequest(
  kind: 'add' | 'del', index: number, a: HostAddress, seq: number, port: number,
): Buffer {
  const attrs = Buffer.concat([nla(IFA_LOCAL, a.bytes), nla(IFA_ADDRESS, a.bytes)]);
  const b = Buffer.alloc(NLMSG_HDRLEN + IFADDRMSG_LEN + attrs.length);
  b.writeUInt32LE(b.length, 0);
  b.writeUInt16LE(kind === 'add' ? RTM_NEWADDR : RTM_DELADDR, 4);
  b.writeUInt16LE(NLM_F_REQUEST | NLM_F_ACK | (kind === 'add' ? NLM_F_CREATE | NLM_F_EXCL : 0), 6);
  b.writeUInt32LE(seq >>> 0, 8);
  b.writeUInt32LE(port >>> 0, 12);
  b.writeUInt8(a.family, 16);
  b.writeUInt8(a.prefix, 17);
  b.writeUInt8(kind === 'add' && a.family === AF_INET6 ? IFA_F_NODAD : 0, 18);
  b.writeUInt8(RT_SCOPE_UNIVERSE, 19);
  b.writeUInt32LE(index >>> 0, 20);
  attrs.copy(b, NLMSG_HDRLEN + IFADDRMSG_LEN);
  return b;
}
