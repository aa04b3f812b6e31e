// Listen addresses (`--metrics-addr`, `--operator-addr`) as kube-proxy's metricsBindAddress
// writes them: `host:port` with an IPv4 address or a DNS-style host name, `[v6]:port` with an IPv6
// address in brackets. Pure: one parser used by the CLI at argument-parse time (a bad address is a
// usage error) and by the HTTP server, so the two can never disagree.
import { parseIp } from './addr.js';

const isIP = (t: string): 0 | 4 | 6 => { const p = parseIp(t); return p ? (p.family === 'IPv4' ? 4 : 6) : 0; };

/** A parsed listen address; `host` is without brackets. */
export interface HostPort {
  host: string;
  port: number;
}

/** parseHostPort's result: the address, or why it is refused (one line naming the input). */
export type HostPortResult = { ok: true; addr: HostPort } | { ok: false; error: string };

const LABEL = '[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?';
const HOSTNAME = new RegExp(`^(?=.{1,253}$)${LABEL}(\\.${LABEL})*$`);

/**
 * Parses `host:port` / `[v6]:port`. Refused: empty text, a missing host or port, a port that is
 * not 1-65535 in plain decimal (0, "random port", only with `allowPortZero`), an unbracketed IPv6
 * address, a host that is neither an IP address nor a host name.
 */
export function parseHostPort(text: string, opts: { allowPortZero?: boolean } = {}): HostPortResult {
  const bad = (why: string): HostPortResult => ({ ok: false,
    error: `${JSON.stringify(text)}: ${why} (expected HOST:PORT or [IPv6]:PORT, e.g. 0.0.0.0:10249)` });
  if (text === '') return bad('empty address');
  let host: string;
  let portText: string;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0) return bad('no closing ]');
    host = text.slice(1, close);
    if (text[close + 1] !== ':') return bad('no :PORT after ]');
    portText = text.slice(close + 2);
    if (isIP(host) !== 6) return bad(`${JSON.stringify(host)} in brackets is not an IPv6 address`);
  } else {
    const colon = text.lastIndexOf(':');
    if (colon < 0) return bad('no :PORT');
    host = text.slice(0, colon);
    portText = text.slice(colon + 1);
    if (host.includes(':')) return bad('an IPv6 address needs brackets');
    if (host === '') return bad('no host (use 0.0.0.0 for every address)');
    if (isIP(host) !== 4 && (!HOSTNAME.test(host) || /^[0-9.]+$/.test(host))) {
      return bad(`${JSON.stringify(host)} is not an IP address or host name`);
    }
  }
  if (portText === '') return bad('no port');
  if (!/^[0-9]{1,5}$/.test(portText)) return bad(`port ${JSON.stringify(portText)} is not a number`);
  const port = Number(portText);
  if (port > 65535) return bad(`port ${port} is above 65535`);
  if (port === 0 && !opts.allowPortZero) return bad('port 0 would listen on a random port');
  return { ok: true, addr: { host, port } };
}

/** `host:port`, with brackets around an IPv6 host (the inverse of parseHostPort). */
export function formatHostPort(a: HostPort): string {
  return isIP(a.host) === 6 ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`;
}
