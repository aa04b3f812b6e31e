// IP address text <-> bytes, without node:net (pure). IPv6 text is produced in the RFC 5952
// canonical form (lower case, longest zero run compressed), which is what inet_ntop — and so
// ipvsadm and the kernel's /proc output — prints.

/** Whether `s` is a dotted-quad IPv4 address. */
export function isIPv4(s: string): boolean {
  return parseIPv4(s) !== undefined;
}

/** Whether `s` is an IPv6 address (with optional embedded IPv4 tail). */
export function isIPv6(s: string): boolean {
  return parseIPv6(s) !== undefined;
}

/** 4 bytes of a dotted-quad address, or undefined when `s` is not one. */
export function parseIPv4(s: string): Uint8Array | undefined {
  const parts = s.split('.');
  if (parts.length !== 4) return undefined;
  const out = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const p = parts[i]!;
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p)) return undefined;
    const n = Number(p);
    if (n > 255) return undefined;
    out[i] = n;
  }
  return out;
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

/** Canonical text of an address (IPv6 compressed and lower-cased); undefined when invalid. */
export function canonicalIP(s: string): string | undefined {
  const v4 = parseIPv4(s);
  if (v4) return formatIPv4(v4);
  const v6 = parseIPv6(s);
  return v6 ? formatIPv6(v6) : undefined;
}
