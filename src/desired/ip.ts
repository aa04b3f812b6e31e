// IP addresses as bigints and CIDR membership, for the desired state. The address syntax and the
// canonical text (RFC 5952 for IPv6, as the kernel client prints what it dumps, so keys compare
// equal) are model/addr's, shared with the codec. pure: no I/O.
import type { Family } from '../model/ipvs.js';
import { formatIPv4, formatIPv6, parseIPv4, parseIPv6 } from '../model/addr.js';

/** A parsed address: family and value. */
export interface ParsedIp {
  family: Family;
  value: bigint;
}

/** Parses an IPv4 or IPv6 address; undefined when it is not one (the syntax is model/addr's). */
export function parseIp(text: string): ParsedIp | undefined {
  const bytes = parseIPv4(text) ?? parseIPv6(text);
  if (!bytes) return undefined;
  let value = 0n;
  for (const b of bytes) value = (value << 8n) | BigInt(b);
  return { family: bytes.length === 4 ? 'IPv4' : 'IPv6', value };
}

/** The canonical text of an address (RFC 5952 for IPv6); undefined when it is not an address. */
export function canonicalIp(text: string): string | undefined {
  const p = parseIp(text);
  if (!p) return undefined;
  return formatIp(p);
}

/** Text of a parsed address (RFC 5952 for IPv6, through model/addr). */
export function formatIp(p: ParsedIp): string {
  const n = p.family === 'IPv4' ? 4 : 16;
  const bytes = new Uint8Array(n);
  for (let i = 0; i < n; i++) bytes[i] = Number((p.value >> BigInt(8 * (n - 1 - i))) & 0xffn);
  return p.family === 'IPv4' ? formatIPv4(bytes) : formatIPv6(bytes);
}

/** A parsed CIDR. */
export interface Cidr {
  family: Family;
  base: bigint;
  prefix: number;
  text: string;
}

/** Parses "10.0.0.0/8" or "fd00::/64" (host bits allowed, ignored); undefined when malformed. */
export function parseCidr(text: string): Cidr | undefined {
  const [addr, len, extra] = text.split('/');
  if (addr === undefined || len === undefined || extra !== undefined || !/^\d{1,3}$/.test(len)) return undefined;
  const ip = parseIp(addr);
  const prefix = Number(len);
  if (!ip || prefix > (ip.family === 'IPv4' ? 32 : 128)) return undefined;
  const bits = ip.family === 'IPv4' ? 32 : 128;
  return { family: ip.family, base: ip.value >> BigInt(bits - prefix), prefix, text };
}

/** Whether `ip` lies in `cidr`. */
export function cidrContains(cidr: Cidr, ip: ParsedIp): boolean {
  if (cidr.family !== ip.family) return false;
  const bits = ip.family === 'IPv4' ? 32 : 128;
  return ip.value >> BigInt(bits - cidr.prefix) === cidr.base;
}

/** Family of an address string by its syntax (no validation). */
export function familyOf(address: string): Family {
  return address.includes(':') ? 'IPv6' : 'IPv4';
}
