// The batched read's contract: listRealServersMany answers, entry by entry, what listRealServers
// answers for the same virtual server (its real servers; empty for a missing one, as the kernel's
// dump cannot tell; the same EINVALARG for a virtual server it cannot ask about). Run against
// FakeIpvs in the unit run (test/unit/ipvs/ipvs-read.test.ts) and NetlinkIpvs on the kernel
// (test/kernel/ipvs-read.test.ts). getVirtualServers answers, entry by entry, the dump's virtual
// server at that key (flags, stats and all), ESRCH for a missing one, EINVALARG for an invalid key.
// Addresses: VIPs 10.200.5.0/24 and fd00:205::/64, pods
// 10.10.5.0/24 and fd00:15::/64.
import { IpvsError } from '../../src/ipvs/errors.js';
import type { IpvsClient } from '../../src/ipvs/types.js';
import {
  type IpvsOp, type RealServer, SvcFlag, type VirtualServer, formatRealServer, formatVirtualServer, makeRealServer,
  makeVirtualServer, virtualServerKey,
} from '../../src/model/ipvs.js';
import { bigintJson } from './wait.js';

const a = makeVirtualServer({ family: 'IPv4', address: '10.200.5.1', port: 80 });
const b = makeVirtualServer({
  family: 'IPv6', protocol: 'UDP', address: 'fd00:205::b', port: 53, scheduler: 'wrr', flags: SvcFlag.PERSISTENT, timeout: 600, netmask: 128,
});
const empty = makeVirtualServer({ family: 'IPv4', protocol: 'SCTP', address: '10.200.5.3', port: 9 });
const fwm = makeVirtualServer({ family: 'IPv4', fwmark: 7 });
const missing = makeVirtualServer({ family: 'IPv4', address: '10.200.5.99', port: 80 });
const invalid = makeVirtualServer({ family: 'IPv4', address: '10.200.5.300', port: 80 });

/** The table the case seeds: `a` with 3 real servers, `b` (IPv6) with 2, `empty` none, `fwm` 1. */
export const READ_SEED: readonly IpvsOp[] = [
  { kind: 'add-service', vs: a },
  ...[1, 2, 3].map((i): IpvsOp => ({ kind: 'add-dest', vs: a, rs: makeRealServer({ address: `10.10.5.${i}`, port: 8080, weight: i }) })),
  { kind: 'add-service', vs: b },
  ...[1, 2].map((i): IpvsOp => ({ kind: 'add-dest', vs: b, rs: makeRealServer({ address: `fd00:15::${i}`, port: 5353 }) })),
  { kind: 'add-service', vs: empty },
  { kind: 'add-service', vs: fwm },
  { kind: 'add-dest', vs: fwm, rs: makeRealServer({ address: '10.10.5.7', port: 0, forward: 'route' }) },
];

/** What the batched read is asked for: present, missing, invalid and repeated virtual servers. */
export const READ_ASKED: readonly VirtualServer[] = [a, missing, b, invalid, empty, fwm, a];

/** The answers, as answerText writes them. */
export const READ_EXPECTED: readonly string[] = [
  '10.10.5.1:8080 w=1 masq | 10.10.5.2:8080 w=2 masq | 10.10.5.3:8080 w=3 masq',
  '',
  '[fd00:15::1]:5353 w=1 masq | [fd00:15::2]:5353 w=1 masq',
  'EINVALARG',
  '',
  '10.10.5.7:0 w=1 route',
  '10.10.5.1:8080 w=1 masq | 10.10.5.2:8080 w=2 masq | 10.10.5.3:8080 w=3 masq',
];

/** getVirtualServers' answers to READ_ASKED, as vsText writes them. */
export const GET_EXPECTED: readonly string[] = [
  'TCP 10.200.5.1:80 rr',
  'ESRCH',
  'UDP [fd00:205::b]:53 wrr persistent=600/128',
  'EINVALARG',
  'SCTP 10.200.5.3:9 rr',
  'FWM 7 IPv4 rr',
  'TCP 10.200.5.1:80 rr',
];

/** One virtual server as text (formatVirtualServer), or the error's code. */
export function vsText(answer: VirtualServer | unknown): string {
  if (answer instanceof IpvsError) return answer.code;
  if (typeof answer !== 'object' || answer === null) return `not an answer: ${String(answer)}`;
  return formatVirtualServer(answer as VirtualServer);
}

/** One answer as text: the real servers sorted (counters dropped), or the error's code. */
export function answerText(answer: RealServer[] | unknown): string {
  if (answer instanceof IpvsError) return answer.code;
  if (!Array.isArray(answer)) return `not an answer: ${String(answer)}`;
  return (answer as RealServer[]).map((rs) => formatRealServer(rs)).sort().join(' | ');
}

/** Seeds `client` (empty) and asks both ways: the batched answers and the one-by-one answers. */
/**
 * Seeds `client` (empty) and asks both ways: the batched answers and the one-by-one answers; then
 * each key's GET_SERVICE, and whether each present one equals the dump's entry field by field.
 */
export async function readCase(client: IpvsClient): Promise<{
  seedErrors: unknown[]; many: string[]; single: string[]; gets: string[]; getsAsDumped: boolean[];
}> {
  const seedErrors = (await client.apply(READ_SEED)).filter((e) => e !== undefined);
  const many = (await client.listRealServersMany(READ_ASKED)).map(answerText);
  const single: string[] = [];
  for (const vs of READ_ASKED) single.push(answerText(await client.listRealServers(vs).catch((e: unknown) => e)));
  const got = await client.getVirtualServers(READ_ASKED);
  const dumped = new Map((await client.listVirtualServers()).map((vs) => [virtualServerKey(vs), vs]));
  const getsAsDumped = got.filter((g) => !(g instanceof IpvsError))
    .map((g) => bigintJson(g) === bigintJson(dumped.get(virtualServerKey(g as VirtualServer))));
  return { seedErrors, many, single, gets: got.map(vsText), getsAsDumped };
}
