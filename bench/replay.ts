// The kernel floor of `npm run bench`: the operator's exact netlink messages, recorded from its
// first sync (NetlinkSocket.recorder sees every chunk as it is sent), replayed by bench/nl-replay.c
// with as little userspace work as there can be (pre-encoded, many per sendmsg(), ACKs read many
// per recvmmsg(), no planning, no decoding beyond the ACK's errno). What the replay costs is what
// the kernel costs for the same writes; what the operator spends beyond it is ours.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NetlinkSocket } from '../src/netlink/socket.js';
import { RTM_NEWADDR } from '../src/rtnl/messages.js';
import { NLMSG_HDRLEN } from '../src/netlink/constants.js';
import { decodeMessages } from '../src/netlink/framing.js';

export { NETLINK_ROUTE } from '../src/rtnl/socket.js';
export const NETLINK_GENERIC = 16;

/** The messages one run sent, per netlink protocol, in order; dumps (reads) left out. */
export interface Recording {
  /** The messages of `protocol`, one Buffer each (made on each call: take them once, at replay). */
  messages(protocol: number): Buffer[];
  /** Stops recording; what was recorded stays. */
  stop(): void;
}

/**
 * Records every non-dump message any NetlinkSocket of this process sends until stop(): one copy of
 * each datagram sent (NetlinkSocket.recorder leaves out those with a dump), split into messages by
 * their headers only when asked. At 30 000 Services the 426 000 messages as Buffers of their own
 * were as many objects on the heap through the changes that follow, whose latency is measured; and
 * a view and an object per message as sent cost the first sync about 5% of its time in the lab VM
 * (docs/performance.md).
 */
export function recordSends(): Recording {
  const byProtocol = new Map<number, Buffer[]>();
  NetlinkSocket.recorder = (protocol, datagram) => {
    let r = byProtocol.get(protocol);
    if (!r) byProtocol.set(protocol, (r = []));
    r.push(Buffer.from(datagram));
  };
  return {
    messages: (protocol) => splitMessages(Buffer.concat(byProtocol.get(protocol) ?? [])),
    stop: () => { NetlinkSocket.recorder = undefined; },
  };
}

/**
 * The netlink messages held back to back in `buf` (as sent: each padded to 4 bytes), as views on it
 * (decodeMessages' framing: a torn message or bytes left over throw).
 */
export function splitMessages(buf: Buffer): Buffer[] {
  return decodeMessages(buf).map((m) => {
    const end = m.payload.byteOffset - buf.byteOffset + m.payload.length;
    return buf.subarray(end - m.payload.length - NLMSG_HDRLEN, end);
  });
}

/**
 * The recorded address adds (RTM_NEWADDR) with their link index set to `index`: the link the
 * operator bound them on was deleted since, and a new one has a new index. Other rtnetlink
 * messages (none today: links go through the package socket) are left out.
 */
export function retargetAddressAdds(messages: readonly Buffer[], index: number): Buffer[] {
  return messages.filter((m) => m.readUInt16LE(4) === RTM_NEWADDR).map((m) => {
    const b = Buffer.from(m);
    b.writeUInt32LE(index >>> 0, 20); // ifaddrmsg.ifa_index, after the 16-byte nlmsghdr
    return b;
  });
}

/**
 * The recorded IPVS messages (those of family `from`) addressed to family id `to`: the controller
 * gives IPVS a new id each time ip_vs is loaded again. Others (the controller's own) are left out.
 */
export function retargetFamily(messages: readonly Buffer[], from: number, to: number): Buffer[] {
  return messages.filter((m) => m.readUInt16LE(4) === from).map((m) => {
    const b = Buffer.from(m);
    b.writeUInt16LE(to, 4); // nlmsghdr.nlmsg_type
    return b;
  });
}

/** What one replay did and took (the replayer's own clock: from the first send to the last ACK). */
export interface ReplayResult {
  messages: number;
  bytes: number;
  perDatagram: number;
  datagrams: number;
  /** The ACKs the messages asked for (NLM_F_ACK), and so waited for. */
  acks: number;
  recvCalls: number;
  ms: number;
  errors: number;
  firstErrno: number;
  truncated: number;
}

/** Where bench/run.ts builds the guest's C tools (under .cache, which the guest sees). */
export function toolPath(root: string, name: 'nl-replay' | 'stall-probe'): string {
  return join(root, '.cache', 'bench', name);
}

/** Where bench/run.ts builds the replayer. */
export function replayerPath(root: string): string {
  return toolPath(root, 'nl-replay');
}

/**
 * Builds the guest's C tools (bench/nl-replay.c, the kernel floor's replayer, and
 * bench/stall-probe.c) with the host's C compiler; returns why not on failure.
 */
export function buildTools(root: string): string | undefined {
  for (const name of ['nl-replay', 'stall-probe'] as const) {
    const r = spawnSync('gcc', ['-O2', '-Wall', '-o', toolPath(root, name), join(root, 'bench', `${name}.c`)], { encoding: 'utf8' });
    if (r.error) return `gcc: ${r.error.message}`;
    if (r.status !== 0) return `gcc exited with ${r.status} on ${name}.c: ${r.stderr}`;
  }
  return undefined;
}

/**
 * Replays `messages` on a new socket of `protocol`, `perDatagram` to a sendmsg(). Throws when the
 * replayer is missing or its socket failed, and when the kernel refused any message (the replay
 * must write what the operator wrote).
 */
export function replay(binary: string, file: string, protocol: number, messages: readonly Buffer[], perDatagram: number): ReplayResult {
  if (!existsSync(binary)) throw new Error(`no replayer at ${binary} (bench/run.ts builds it with gcc)`);
  writeFileSync(file, Buffer.concat(messages));
  const r = spawnSync(binary, [String(protocol), file, String(perDatagram)], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`nl-replay exited with ${r.status}: ${r.stderr}`);
  const res = JSON.parse(r.stdout) as ReplayResult;
  if (res.messages !== messages.length) throw new Error(`nl-replay read ${res.messages} messages of ${messages.length}`);
  if (res.errors || res.truncated) throw new Error(`nl-replay: ${res.errors} refused (first errno ${res.firstErrno}), ${res.truncated} truncated`);
  return res;
}

/** The index of link `name` (from sysfs), or undefined when there is none. */
export function linkIndex(name: string): number | undefined {
  try {
    return Number(readFileSync(`/sys/class/net/${name}/ifindex`, 'utf8').trim());
  } catch {
    return undefined;
  }
}
