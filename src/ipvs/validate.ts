// The one validation of virtual and real servers (ports, families, timeouts, weights, ...): both
// IPVS clients (NetlinkIpvs before sending, FakeIpvs before applying) refuse an op with `checkOp`'s
// error, and the desired-state layer drops what these functions refuse with a Problem, so nothing
// the kernel would refuse is ever planned. A bad value is refused with a message naming it rather
// than an EINVAL/ERANGE from deep inside IPVS. pure.
import type { IpvsOp, RealServer, VirtualServer } from '../model/ipvs.js';
import { FORWARD_METHODS, formatOp } from '../model/ipvs.js';
import { parseIPv4Number, parseIPv6 } from '../model/addr.js';
import { PENAME_MAXLEN, SCHEDNAME_MAXLEN } from './constants.js';
import { IpvsError } from './errors.js';

const U32_MAX = 0xffffffff;
/** The kernel keeps weights in an int and refuses negative ones. */
export const MAX_WEIGHT = 0x7fffffff;

function isInt(v: unknown, lo: number, hi: number): boolean {
  return typeof v === 'number' && Number.isInteger(v) && v >= lo && v <= hi;
}

function addressProblem(family: string, address: string): string | undefined {
  const ok = family === 'IPv4' ? parseIPv4Number(address) !== undefined
    : family === 'IPv6' ? parseIPv6(address) !== undefined : false;
  if (family !== 'IPv4' && family !== 'IPv6') return `family ${JSON.stringify(family)} is not IPv4 or IPv6`;
  return ok ? undefined : `address ${JSON.stringify(address)} is not an ${family} address`;
}

/** Problems with a virtual server's identity (what DEL_SERVICE and dest ops send), or []. */
export function virtualServerKeyProblems(vs: VirtualServer): string[] {
  const p: string[] = [];
  if (vs.fwmark) {
    if (!isInt(vs.fwmark, 1, U32_MAX)) p.push(`fwmark ${vs.fwmark} is not in 1..${U32_MAX}`);
    if (vs.family !== 'IPv4' && vs.family !== 'IPv6') p.push(`family ${JSON.stringify(vs.family)} is not IPv4 or IPv6`);
    return p;
  }
  const ap = addressProblem(vs.family, vs.address);
  if (ap) p.push(ap);
  if (!['TCP', 'UDP', 'SCTP'].includes(vs.protocol)) {
    p.push(`protocol ${JSON.stringify(vs.protocol)} is not TCP, UDP or SCTP`);
  }
  if (!isInt(vs.port, 0, 65535)) p.push(`port ${vs.port} is not in 0..65535`);
  return p;
}

/** Problems with everything NEW/SET_SERVICE sends, or []. */
export function virtualServerProblems(vs: VirtualServer): string[] {
  const p = virtualServerKeyProblems(vs);
  const schedBytes = Buffer.byteLength(vs.scheduler ?? '', 'utf8');
  if (!vs.scheduler || schedBytes > SCHEDNAME_MAXLEN - 1 || !/^[a-z0-9_]+$/.test(vs.scheduler)) {
    p.push(`scheduler ${JSON.stringify(vs.scheduler)} must be 1..${SCHEDNAME_MAXLEN - 1} bytes of [a-z0-9_]`);
  }
  if (!isInt(vs.flags, 0, U32_MAX)) p.push(`flags ${vs.flags} are not a u32`);
  if (!isInt(vs.timeout, 0, U32_MAX)) p.push(`persistence timeout ${vs.timeout} is not a u32`);
  if (vs.family === 'IPv6') {
    if (!isInt(vs.netmask, 1, 128)) p.push(`IPv6 persistence netmask ${vs.netmask} is not a prefix length 1..128`);
  } else if (!isInt(vs.netmask, 0, U32_MAX) || !isContiguousMask(vs.netmask)) {
    p.push(`IPv4 persistence netmask 0x${(vs.netmask >>> 0).toString(16)} is not a contiguous mask`);
  }
  if (vs.peName && (Buffer.byteLength(vs.peName, 'utf8') > PENAME_MAXLEN - 1 || !/^[a-z0-9_]+$/.test(vs.peName))) {
    p.push(`persistence engine ${JSON.stringify(vs.peName)} must be up to ${PENAME_MAXLEN - 1} bytes of [a-z0-9_]`);
  }
  return p;
}

function isContiguousMask(m: number): boolean {
  const inv = (~m) >>> 0;
  return ((inv + 1) & inv) === 0;
}

/** Problems with a real server (`full`: everything NEW/SET_DEST sends), or []. */
export function realServerProblems(vs: VirtualServer, rs: RealServer, full: boolean): string[] {
  const p: string[] = [];
  const ap = addressProblem(rs.family, rs.address);
  if (ap) p.push(ap);
  if (!isInt(rs.port, 0, 65535)) p.push(`real server port ${rs.port} is not in 0..65535`);
  if (!full) return p;
  if (!isInt(rs.weight, 0, MAX_WEIGHT)) p.push(`weight ${rs.weight} is not in 0..${MAX_WEIGHT}`);
  if (!(FORWARD_METHODS as readonly string[]).includes(rs.forward)) {
    p.push(`forwarding method ${JSON.stringify(rs.forward)} is unknown`);
  }
  if (!isInt(rs.upperThreshold, 0, U32_MAX)) p.push(`upper threshold ${rs.upperThreshold} is not a u32`);
  if (!isInt(rs.lowerThreshold, 0, U32_MAX)) p.push(`lower threshold ${rs.lowerThreshold} is not a u32`);
  // ip_vs_add_dest / ip_vs_edit_dest: ERANGE when l_threshold > u_threshold (0 is not "no limit" here).
  else if (rs.lowerThreshold > rs.upperThreshold) {
    p.push(`lower threshold ${rs.lowerThreshold} is above the upper threshold ${rs.upperThreshold}`);
  }
  if (rs.forward === 'tunnel') {
    if (!['ipip', 'gue', 'gre'].includes(rs.tunnelType)) {
      p.push(`tunnel type ${JSON.stringify(rs.tunnelType)} is unknown`);
    }
    if (!isInt(rs.tunnelPort, 0, 65535)) p.push(`tunnel port ${rs.tunnelPort} is not in 0..65535`);
    if (rs.tunnelType === 'gue' && rs.tunnelPort === 0) p.push('a GUE tunnel needs a tunnel port');
    if (!isInt(rs.tunnelFlags, 0, 0xffff)) p.push(`tunnel flags ${rs.tunnelFlags} are not a u16`);
  }
  // The kernel accepts a real server of another family only for tunnelling.
  if (rs.family !== vs.family && rs.forward !== 'tunnel') {
    p.push(`an ${rs.family} real server behind an ${vs.family} virtual server needs forwarding "tunnel"`);
  }
  return p;
}

/** Problems with one op of a plan, or []. */
export function opProblems(op: IpvsOp): string[] {
  switch (op.kind) {
    case 'add-service':
    case 'update-service':
      return virtualServerProblems(op.vs);
    case 'delete-service':
      return virtualServerKeyProblems(op.vs);
    case 'add-dest':
    case 'update-dest':
      return [...virtualServerKeyProblems(op.vs), ...realServerProblems(op.vs, op.rs, true)];
    case 'delete-dest':
      return [...virtualServerKeyProblems(op.vs), ...realServerProblems(op.vs, op.rs, false)];
  }
}

/** The IpvsError (isInvalidArgument, code EINVALARG) both clients answer for an invalid op, or undefined. */
export function checkOp(op: IpvsOp): IpvsError | undefined {
  const p = opProblems(op);
  return p.length ? IpvsError.invalidArgument(formatOp(op), p.join('; ')) : undefined;
}

/** The IpvsError both clients answer for a GET_DEST dump of an invalid virtual server key, or undefined. */
export function checkDumpDests(vs: VirtualServer): IpvsError | undefined {
  const p = virtualServerKeyProblems(vs);
  return p.length ? IpvsError.invalidArgument('dump-dests', p.join('; ')) : undefined;
}

/** The IpvsError both clients answer for a GET_SERVICE of an invalid virtual server key, or undefined. */
export function checkGetService(vs: VirtualServer): IpvsError | undefined {
  const p = virtualServerKeyProblems(vs);
  return p.length ? IpvsError.invalidArgument('get-service', p.join('; ')) : undefined;
}
