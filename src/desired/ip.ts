// IP addresses and CIDRs without node:net (a pure folder): parsing to bigint, the canonical text
// form (RFC 5952 for IPv6, as the kernel client prints what it dumps, so keys compare equal), and
// CIDR membership. pure: no I/O.
import type { Family } from '../model/ipvs.js';

/** A parsed address: family and value. */
export interface ParsedIp {
  family: Family;
  value: bigint;
}

/** Parses an IPv4 or IPv6 address; undefined when it is not one. */
export function parseIp(text: string): ParsedIp | undefined {
  if (text.includes(':')) {
    const v = parseV6(text);
    return v === undefined ? undefined : { family: 'IPv6', value: v };
  }
  const v = parseV4(text);
  return v === undefined ? undefined : { family: 'IPv4', value: BigInt(v) };
}

function parseV4(text: string): number | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  let v = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255) return undefined;
    v = v * 256 + Number(p);
  }
  return v;
}

function parseV6(text: string): bigint | undefined {
  let s = text;
  const lastColon = s.lastIndexOf(':');
  if (s.slice(lastColon + 1).includes('.')) {
    // Embedded IPv4 (::ffff:1.2.3.4): rewrite its 32 bits as two hex groups.
    const v4 = parseV4(s.slice(lastColon + 1));
    if (v4 === undefined) return undefined;
    s = `${s.slice(0, lastColon + 1)}${Math.floor(v4 / 65536).toString(16)}:${(v4 % 65536).toString(16)}`;
  }
  const halves = s.split('::');
  if (halves.length > 2) return undefined;
  const parse = (h: string | undefined): number[] | undefined => {
    if (!h) return [];
    const groups = h.split(':');
    const out: number[] = [];
    for (const g of groups) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return undefined;
      out.push(parseInt(g, 16));
    }
    return out;
  };
  const head = parse(halves[0]);
  const rest = parse(halves[1]);
  if (!head || !rest) return undefined;
  const given = head.length + rest.length;
  let groups: number[];
  if (halves.length === 2) {
    if (given > 7) return undefined;
    groups = [...head, ...new Array<number>(8 - given).fill(0), ...rest];
  } else {
    if (given !== 8) return undefined;
    groups = head;
  }
  let v = 0n;
  for (const g of groups) v = (v << 16n) | BigInt(g);
  return v;
}

/** The canonical text of an address (RFC 5952 for IPv6); undefined when it is not an address. */
export function canonicalIp(text: string): string | undefined {
  const p = parseIp(text);
  if (!p) return undefined;
  return formatIp(p);
}

/** Text of a parsed address. */
export function formatIp(p: ParsedIp): string {
  if (p.family === 'IPv4') {
    const v = Number(p.value);
    return [v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255].join('.');
  }
  const groups: number[] = [];
  for (let i = 7; i >= 0; i--) groups.push(Number((p.value >> BigInt(i * 16)) & 0xffffn));
  // Longest run of >= 2 zero groups, the first one on ties, becomes "::".
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) { best = i; bestLen = j - i; }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
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
