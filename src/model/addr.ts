// The one IP/CIDR module: address text <-> bytes without node:net, addresses as bigints, CIDR
// membership, and IPv4 prefix <-> mask. IPv6 text is produced in the RFC 5952 canonical form
// (lower case, longest zero run compressed), which is what inet_ntop — and so ipvsadm and the
// kernel's /proc output — prints, so keys built from user input and from kernel dumps compare
// equal. pure: no I/O.

/** Address family of an address, a virtual or a real server (named as EndpointSlice addressType names it). */
export type Family = 'IPv4' | 'IPv6';

/**
 * A dotted-quad address (each part 0..255 in decimal, no leading zero) as a u32, or undefined
 * when `s` is not one. One pass over the characters, nothing allocated: the IPVS client parses
 * two addresses per op, and splitting with a regular expression per part was a sixth of its
 * encoding time.
 */
export function parseIPv4Number(s: string): number | undefined {
  let v = 0;
  let part = 0;
  let n = 0;
  let digits = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 46 /* . */) {
      if (digits === 0 || part === 3) return undefined;
      v = v * 256 + n;
      part++;
      n = 0;
      digits = 0;
    } else if (c >= 48 && c <= 57) {
      if (digits === 1 && n === 0) return undefined; // a leading zero
      n = n * 10 + (c - 48);
      if (++digits > 3 || n > 255) return undefined;
    } else {
      return undefined;
    }
  }
  if (part !== 3 || digits === 0) return undefined;
  return v * 256 + n;
}

/** 4 bytes of a dotted-quad address (as parseIPv4Number reads it), or undefined when `s` is not one. */
export function parseIPv4(s: string): Uint8Array | undefined {
  const v = parseIPv4Number(s);
  if (v === undefined) return undefined;
  return new Uint8Array([v >>> 24, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff]);
}

/** 16 bytes of an IPv6 address, or undefined when `s` is not one. */
export function parseIPv6(s: string): Uint8Array | undefined {
  if (s.length < 2 || s.length > 45) return undefined;
  const halves = s.split('::');
  if (halves.length > 2) return undefined;
  const groups = (h: string): number[] | undefined => {
    if (h === '') return [];
    const out: number[] = [];
    const parts = h.split(':');
    for (let i = 0; i < parts.length; i++) {
      const p = parts[i]!;
      if (i === parts.length - 1 && p.includes('.')) {
        const v4 = parseIPv4(p);
        if (!v4) return undefined;
        out.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(p)) return undefined;
        out.push(parseInt(p, 16));
      }
    }
    return out;
  };
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  if (!head || !tail) return undefined;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined;
  const all = [...head, ...new Array<number>(missing).fill(0), ...tail];
  const out = new Uint8Array(16);
  all.forEach((g, i) => { out[2 * i] = g >> 8; out[2 * i + 1] = g & 0xff; });
  return out;
}

/** Dotted-quad text of 4 bytes. */
export function formatIPv4(b: Uint8Array): string {
  return `${b[0]}.${b[1]}.${b[2]}.${b[3]}`;
}

/** RFC 5952 text of 16 bytes. */
export function formatIPv6(b: Uint8Array): string {
  const g: number[] = [];
  for (let i = 0; i < 8; i++) g.push((b[2 * i]! << 8) | b[2 * i + 1]!);
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) { bestStart = i; bestLen = j - i; }
    i = j;
  }
  const hex = (xs: number[]) => xs.map((x) => x.toString(16)).join(':');
  if (bestStart < 0) return hex(g);
  return `${hex(g.slice(0, bestStart))}::${hex(g.slice(bestStart + bestLen))}`;
}

/**
 * Canonical text of an address (RFC 5952 for IPv6); undefined when it is not an address. Text
 * that is canonical already comes back as the same string: the desired state's real servers then
 * share their address with the EndpointSlice that holds it (100 000 endpoints: about 3 MB of
 * copies otherwise).
 */
export function canonicalIP(text: string): string | undefined {
  // parseIPv4Number takes only canonical dotted quads: the common case, without bigints.
  if (parseIPv4Number(text) !== undefined) return text;
  const p = parseIp(text);
  if (!p) return undefined;
  const canonical = formatIp(p);
  return canonical === text ? text : canonical;
}

/** A parsed address: family and value. */
export interface ParsedIp {
  family: Family;
  value: bigint;
}

/** Parses an IPv4 or IPv6 address; undefined when it is not one. */
export function parseIp(text: string): ParsedIp | undefined {
  const bytes = parseIPv4(text) ?? parseIPv6(text);
  if (!bytes) return undefined;
  let value = 0n;
  for (const b of bytes) value = (value << 8n) | BigInt(b);
  return { family: bytes.length === 4 ? 'IPv4' : 'IPv6', value };
}

/** Text of a parsed address (RFC 5952 for IPv6). */
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

/** IPv4 mask of a prefix length as a u32 (24 -> 0xffffff00, 0 -> 0). */
export function prefixToMask(bits: number): number {
  return bits <= 0 ? 0 : (0xffffffff << (32 - Math.min(bits, 32))) >>> 0;
}

/** Prefix length of an IPv4 mask: its leading one bits (0xffffff00 -> 24). */
export function maskToPrefix(mask: number): number {
  return Math.clz32(~mask >>> 0);
}

/** An address, protocol and port: one member of an ipset of type hash:ip,port (the SYN hold's). */
export interface IpPortMember {
  family: Family;
  address: string;
  protocol: 'tcp' | 'udp' | 'sctp';
  port: number;
}
