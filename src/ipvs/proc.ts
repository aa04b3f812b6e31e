// The kernel's text listing of its IPVS table, /proc/net/ip_vs (ip_vs_ctl.c ip_vs_info_seq_show):
// every virtual server of the reader's network namespace with its real servers, in one file. The
// generic netlink API has no such read: its real servers come one GET_DEST dump per virtual server,
// 36 000 dumps at 30 000 Services. The listing shows a real server's address, port, forwarding
// method, weight and connections, not its thresholds nor its tunnel settings; and a firewall-mark
// line names no address family. So a full read takes from it only what it shows in full
// (sync/full-read.ts). Writing it, for FakeIpvs: proc-format.ts; reading the file: proc-read.ts. pure.
import { canonicalIP } from '../model/addr.js';
import {
  FORWARD_METHODS, type ForwardMethod, type Protocol, type RealServer, virtualServerKey,
} from '../model/ipvs.js';

/** The kernel's names of the forwarding methods (ip_vs_fwd_name), in FORWARD_METHODS' order. */
export const FORWARD_NAMES = ['Masq', 'Local', 'Tunnel', 'Route', 'Bypass'] as const;
/** The first letters of FORWARD_NAMES, in order: each name's is its own. */
const FORWARD_FIRST = FORWARD_NAMES.map((name) => name[0]).join('');
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

/** Each address-keyed virtual server's real servers, by virtualServerKey (parseProcListing). */
export type ProcListing = Map<string, RealServer[]>;

/** One virtual server of the listing: its key, and its real servers unless a line of it could not be read. */
export interface ListedServer { readonly key: string; readonly rss: RealServer[] | undefined }

/**
 * Reads a listing as it comes, in pieces of any size, holding no more than one piece and a line:
 * at 30 000 Services x 10 the listing is about 20 MB. Each address-keyed virtual server comes out
 * once its record is complete, with what the listing shows of its real servers (address, port,
 * weight, forwarding method, active and inactive connections); thresholds and tunnel settings are
 * the defaults, persistent connections unknown. Firewall marks and protocols other than TCP, UDP
 * and SCTP are left out.
 */
export class ListingParser {
  private key: string | undefined;
  private current: RealServer[] | undefined;
  /** The part of a line the last piece ended with. */
  private rest = '';
  private done: ListedServer[] = [];

  /** Takes the next piece of the listing; the virtual servers it completed, in order. */
  push(piece: string): ListedServer[] {
    const text = this.rest + piece;
    let start = 0;
    for (let end = text.indexOf('\n'); end >= 0; end = text.indexOf('\n', start)) {
      this.line(text.slice(start, end));
      start = end + 1;
    }
    this.rest = text.slice(start);
    return this.take();
  }

  /** The listing ended: the virtual servers still open. */
  end(): ListedServer[] {
    if (this.rest !== '') this.line(this.rest);
    this.rest = '';
    this.close();
    return this.take();
  }

  private take(): ListedServer[] {
    const done = this.done;
    this.done = [];
    return done;
  }

  private close(): void {
    if (this.key !== undefined) this.done.push({ key: this.key, rss: this.current });
    this.key = undefined;
    this.current = undefined;
  }

  private line(line: string): void {
    if (line === '' || HEADER.test(line)) return;
    if (line.startsWith('  -> ')) {
      if (this.current === undefined) return; // under a line it could not read, or spoiled already
      let rs = ipv4RealServer(line);
      if (rs === undefined) {
        const dest = DEST_LINE.exec(line);
        rs = dest ? realServerOf(dest) : undefined;
      }
      if (rs) this.current.push(rs);
      else this.current = undefined;
      return;
    }
    this.close();
    this.key = serviceKeyOf(line);
    if (this.key !== undefined) this.current = [];
  }
}

/**
 * A whole listing read at once: the real servers of each virtual server it shows. A virtual server
 * with a line it cannot read, and a key listed twice, are left out: their caller reads them another
 * way.
 */
export function parseProcListing(text: string): ProcListing {
  const p = new ListingParser();
  const out: ProcListing = new Map();
  const twice = new Set<string>();
  for (const { key, rss } of [...p.push(text), ...p.end()]) {
    if (out.has(key) || twice.has(key)) twice.add(key);
    if (rss) out.set(key, rss);
  }
  for (const key of twice) out.delete(key);
  return out;
}

/** A listing read in turn: each read's completed virtual servers, until the end or close(). */
export interface ListingReader {
  /** The virtual servers the next read completed (maybe none); undefined once the listing ended or failed. */
  next(): Promise<ListedServer[] | undefined>;
  close(): Promise<void>;
}

/** A listing held as text (FakeIpvs's), given in pieces of `pieceBytes`, as the kernel gives a page a read. */
export function textListing(text: string, pieceBytes = 4096): ListingReader {
  const p = new ListingParser();
  let at = 0;
  return {
    // As a file: the read after the last piece finds the end (and the last record completes).
    next: async () => {
      if (at > text.length) return undefined;
      if (at === text.length) {
        at++;
        return p.end();
      }
      const piece = text.slice(at, at + pieceBytes);
      at = Math.min(text.length, at + pieceBytes);
      return p.push(piece);
    },
    close: async () => { at = text.length + 1; },
  };
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

/** Where the token reader is in its line. */
let at = 0;

/**
 * An IPv4 real server's line ("  -> 0A010001:1F90      Masq    3      0          0"), read
 * character by character: the regex and its match cost about half of a 30 000-Service listing's
 * parse. Undefined where the line is not that form exactly (DEST_LINE then reads or refuses it).
 */
function ipv4RealServer(l: string): RealServer | undefined {
  if (l.length < 20 || l.charCodeAt(13) !== 58) return undefined; // ':'
  const ip = hexAt(l, 5, 13);
  const port = hexAt(l, 14, 18);
  at = 18;
  const f = token(l);
  const i = f < 0 ? -1 : forwardAt(l, f);
  const weight = intAt(l, token(l));
  const activeConns = intAt(l, token(l));
  const inactiveConns = intAt(l, token(l));
  while (l.charCodeAt(at) === 32) at++;
  const bad = ip < 0 || port < 0 || i < 0 || at !== l.length;
  if (bad || Number.isNaN(weight + activeConns + inactiveConns)) return undefined;
  return {
    // join, not a template: an address of 13 characters or more would be a cons string (docs/performance.md).
    address: [ip >>> 24, (ip >>> 16) & 0xff, (ip >>> 8) & 0xff, ip & 0xff].join('.'), port, family: 'IPv4', weight,
    forward: FORWARD_METHODS[i] as ForwardMethod, upperThreshold: 0, lowerThreshold: 0, tunnelType: 'ipip',
    tunnelPort: 0, tunnelFlags: 0, activeConns, inactiveConns, persistentConns: undefined,
  };
}

/** The index in FORWARD_NAMES of the name from `start` to `at`; -1 when none. By its first letter: all differ. */
function forwardAt(l: string, start: number): number {
  const i = FORWARD_FIRST.indexOf(l[start]!);
  const name = FORWARD_NAMES[i];
  return name !== undefined && name.length === at - start && l.startsWith(name, start) ? i : -1;
}

/** Skips one or more spaces at `at`, then the token there; its start, or -1 when no spaces or no token. */
function token(l: string): number {
  const from = at;
  while (l.charCodeAt(at) === 32) at++;
  if (at === from || at >= l.length) return -1;
  const start = at;
  while (at < l.length && l.charCodeAt(at) !== 32) at++;
  return start;
}

/** The upper-case hex number in [start, end); -1 when any character is not one. */
function hexAt(l: string, start: number, end: number): number {
  let n = 0;
  for (let k = start; k < end; k++) {
    const c = l.charCodeAt(k);
    const d = c >= 48 && c <= 57 ? c - 48 : c >= 65 && c <= 70 ? c - 55 : -1;
    if (d < 0) return -1;
    n = n * 16 + d;
  }
  return n;
}

/** The decimal integer from `start` to `at` (a leading '-' allowed, 15 digits at most); NaN when not one. */
function intAt(l: string, start: number): number {
  if (start < 0) return NaN;
  const neg = l.charCodeAt(start) === 45;
  const from = neg ? start + 1 : start;
  if (at === from || at - from > 15) return NaN;
  let n = 0;
  for (let k = from; k < at; k++) {
    const c = l.charCodeAt(k) - 48;
    if (c < 0 || c > 9) return NaN;
    n = n * 10 + c;
  }
  return neg ? -n : n;
}

/** An address as the netlink decoder gives it, from the listing's hex (IPv4) or %pI6 (IPv6) form. */
function addressOf(hex: string | undefined, v6: string | undefined): string | undefined {
  if (v6 !== undefined) return canonicalIP(v6);
  if (hex === undefined) return undefined;
  const n = parseInt(hex, 16);
  return [n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff].join('.');
}
