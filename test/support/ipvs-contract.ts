// The IPVS contract: one table of ops (every op kind x ok / exists / not found / invalid) with the
// answer the kernel gives, run against FakeIpvs in the unit run (test/unit/ipvs/ipvs-contract.test.ts)
// and against NetlinkIpvs on the real kernel in the lab VM (test/kernel/ipvs-contract.test.ts).
// Where they disagree the fake is wrong. Each case starts from an empty table, applies `setup`
// (which must succeed), then `op`, and checks the answer and the table afterwards.
// Addresses: VIPs 10.200.1.0/24 and fd00:200::/64, pods 10.10.0.0/16 and fd00:10::/64.
import { Errno, isExists, isInvalidArgument, isNotFound } from '../../src/netlink/errors.js';
import { IpvsError } from '../../src/ipvs/errors.js';
import type { IpvsClient } from '../../src/ipvs/types.js';
import {
  type IpvsOp, type IpvsOp as Op, type RealServer, type VirtualServer, formatTable, makeRealServer, makeVirtualServer, realServerKey,
  virtualServerKey,
} from '../../src/model/ipvs.js';

/** What an op answers: success, a kernel errno (with the predicate callers use), or our validation. */
export type Outcome =
  | { ok: true }
  | { errno: number; is: (e: unknown) => boolean }
  | { invalid: true };

/** The outcome categories every op kind is tried with (where the kernel has one). */
export type Category = 'ok' | 'exists' | 'not found' | 'invalid';

/** One row of the contract. */
export interface ContractCase {
  name: string;
  category: Category;
  setup: readonly Op[];
  op: IpvsOp;
  outcome: Outcome;
  /** The table afterwards as formatTable text; undefined: unchanged from after `setup`. */
  after?: string;
}

const vs = makeVirtualServer({ family: 'IPv4', address: '10.200.1.63', port: 9000 });
const vs6 = makeVirtualServer({ family: 'IPv6', protocol: 'UDP', address: 'fd00:200::a', port: 53 });
const rs = makeRealServer({ address: '10.10.1.3', port: 80 });
const rs2 = makeRealServer({ address: '10.10.1.4', port: 80 });
const rs6 = makeRealServer({ address: 'fd00:10::3', port: 5353 });

export const OK: Outcome = { ok: true };
const EEXIST: Outcome = { errno: Errno.EEXIST, is: isExists };
const ESRCH: Outcome = { errno: Errno.ESRCH, is: isNotFound };
export const ENOENT: Outcome = { errno: Errno.ENOENT, is: isNotFound };
const INVALID: Outcome = { invalid: true };
/** A scheduler name no kernel's IPVS has (`twos` was one only before 6.2: test/kernel/ipvs-contract.test.ts). */
const NO_SUCH_SCHEDULER = 'nosuchsched';

const addVs: Op = { kind: 'add-service', vs };
const addRs: Op = { kind: 'add-dest', vs, rs };
const withService = [addVs];
const withDest = [addVs, addRs];
const T_VS = 'add-service TCP 10.200.1.63:9000 rr';
const T_RS = 'add-dest TCP 10.200.1.63:9000 -> 10.10.1.3:80 w=1 masq';

/** The contract, in the kernel's terms (ip_vs_ctl.c, Linux 6.1). */
export const CONTRACT: readonly ContractCase[] = [
  // add-service (NEW_SERVICE)
  { name: 'add a service', category: 'ok', setup: [], op: addVs, outcome: OK, after: T_VS },
  { name: 'add an IPv6 sh service with flags', category: 'ok', setup: [], op: { kind: 'add-service', vs: { ...vs6, scheduler: 'sh', flags: 0x8 } },
    outcome: OK, after: 'add-service UDP [fd00:200::a]:53 sh flag-1' },
  { name: 'add a persistent service', category: 'ok', setup: [], op: { kind: 'add-service', vs: { ...vs, flags: 0x1, timeout: 600, netmask: 0xffffff00 } },
    outcome: OK, after: 'add-service TCP 10.200.1.63:9000 rr persistent=600/24' },
  { name: 'add a duplicate service', category: 'exists', setup: withService, op: addVs, outcome: EEXIST },
  { name: 'add a duplicate with an unknown scheduler: EEXIST comes first', category: 'exists', setup: withService,
    op: { kind: 'add-service', vs: { ...vs, scheduler: NO_SUCH_SCHEDULER } }, outcome: EEXIST },
  { name: 'add with a scheduler the kernel lacks', category: 'not found', setup: [],
    op: { kind: 'add-service', vs: { ...vs6, scheduler: NO_SUCH_SCHEDULER } }, outcome: ENOENT },
  { name: 'add with port 70000', category: 'invalid', setup: [], op: { kind: 'add-service', vs: { ...vs, port: 70000 } }, outcome: INVALID },
  { name: 'add with an IPv6 address in an IPv4 service', category: 'invalid', setup: [], op: { kind: 'add-service', vs: { ...vs, address: 'fd00:200::1' } }, outcome: INVALID },
  { name: 'add with a non-contiguous IPv4 netmask', category: 'invalid', setup: [], op: { kind: 'add-service', vs: { ...vs, flags: 0x1, netmask: 0xff00ff00 } }, outcome: INVALID },
  { name: 'add with a scheduler name the kernel cannot hold', category: 'invalid', setup: [], op: { kind: 'add-service', vs: { ...vs, scheduler: 'a_very_long_scheduler' } }, outcome: INVALID },
  { name: 'add with a timeout of -5', category: 'invalid', setup: [], op: { kind: 'add-service', vs: { ...vs, flags: 0x1, timeout: -5 } }, outcome: INVALID },

  // update-service (SET_SERVICE)
  { name: 'update a service', category: 'ok', setup: withDest, op: { kind: 'update-service', vs: { ...vs, scheduler: 'wrr' } },
    outcome: OK, after: `add-service TCP 10.200.1.63:9000 wrr\n${T_RS}` },
  { name: 'update a missing service', category: 'not found', setup: withService, op: { kind: 'update-service', vs: vs6 }, outcome: ESRCH },
  { name: 'update to a scheduler the kernel lacks', category: 'not found', setup: withService,
    op: { kind: 'update-service', vs: { ...vs, scheduler: NO_SUCH_SCHEDULER } }, outcome: ENOENT },
  { name: 'update with a bad scheduler name', category: 'invalid', setup: withService, op: { kind: 'update-service', vs: { ...vs, scheduler: 'RR!' } }, outcome: INVALID },

  // delete-service (DEL_SERVICE)
  { name: 'delete a service with its real servers', category: 'ok', setup: withDest, op: { kind: 'delete-service', vs }, outcome: OK, after: '' },
  { name: 'delete a missing service', category: 'not found', setup: withService, op: { kind: 'delete-service', vs: vs6 }, outcome: ESRCH },
  { name: 'delete with port -1', category: 'invalid', setup: withService, op: { kind: 'delete-service', vs: { ...vs, port: -1 } }, outcome: INVALID },

  // add-dest (NEW_DEST)
  { name: 'add a real server', category: 'ok', setup: withService, op: addRs, outcome: OK, after: `${T_VS}\n${T_RS}` },
  { name: 'add a weight-0 real server with thresholds', category: 'ok', setup: withService,
    op: { kind: 'add-dest', vs, rs: { ...rs, weight: 0, upperThreshold: 100, lowerThreshold: 10 } },
    outcome: OK, after: `${T_VS}\nadd-dest TCP 10.200.1.63:9000 -> 10.10.1.3:80 w=0 masq x=100 y=10` },
  { name: 'add an IPv6 tunnel real server behind an IPv4 service (only tunnel crosses families)', category: 'ok', setup: withService,
    op: { kind: 'add-dest', vs, rs: { ...rs6, forward: 'tunnel' } },
    outcome: OK, after: `${T_VS}\nadd-dest TCP 10.200.1.63:9000 -> [fd00:10::3]:5353 w=1 tunnel tun=ipip` },
  { name: 'add a duplicate real server', category: 'exists', setup: withDest, op: addRs, outcome: EEXIST },
  { name: 'add a real server to a missing service', category: 'not found', setup: withService, op: { kind: 'add-dest', vs: vs6, rs: rs6 }, outcome: ESRCH },
  { name: 'add a masq real server of another family', category: 'invalid', setup: withService, op: { kind: 'add-dest', vs, rs: rs6 }, outcome: INVALID },
  { name: 'add a route real server of another family', category: 'invalid', setup: withService, op: { kind: 'add-dest', vs, rs: { ...rs6, forward: 'route' } }, outcome: INVALID },
  { name: 'add with weight -1', category: 'invalid', setup: withService, op: { kind: 'add-dest', vs, rs: { ...rs, weight: -1 } }, outcome: INVALID },
  { name: 'add with the lower threshold above the upper one', category: 'invalid', setup: withService,
    op: { kind: 'add-dest', vs, rs: { ...rs, upperThreshold: 5, lowerThreshold: 10 } }, outcome: INVALID },
  { name: 'add a GUE tunnel without a port', category: 'invalid', setup: withService, op: { kind: 'add-dest', vs, rs: { ...rs, forward: 'tunnel', tunnelType: 'gue' } }, outcome: INVALID },
  { name: 'add with real server port 1.5', category: 'invalid', setup: withService, op: { kind: 'add-dest', vs, rs: { ...rs, port: 1.5 } }, outcome: INVALID },

  // update-dest (SET_DEST)
  { name: 'update a real server', category: 'ok', setup: withDest, op: { kind: 'update-dest', vs, rs: { ...rs, weight: 5 } },
    outcome: OK, after: `${T_VS}\nadd-dest TCP 10.200.1.63:9000 -> 10.10.1.3:80 w=5 masq` },
  { name: 'update a missing real server', category: 'not found', setup: withDest, op: { kind: 'update-dest', vs, rs: rs2 }, outcome: ENOENT },
  { name: 'update a real server of a missing service', category: 'not found', setup: withDest, op: { kind: 'update-dest', vs: vs6, rs: rs6 }, outcome: ESRCH },
  { name: 'update with weight 2^31', category: 'invalid', setup: withDest, op: { kind: 'update-dest', vs, rs: { ...rs, weight: 2 ** 31 } }, outcome: INVALID },

  // delete-dest (DEL_DEST)
  { name: 'delete a real server', category: 'ok', setup: withDest, op: { kind: 'delete-dest', vs, rs }, outcome: OK, after: T_VS },
  { name: 'delete a missing real server', category: 'not found', setup: withDest, op: { kind: 'delete-dest', vs, rs: rs2 }, outcome: ENOENT },
  { name: 'delete a real server of a missing service', category: 'not found', setup: withDest, op: { kind: 'delete-dest', vs: vs6, rs: rs6 }, outcome: ESRCH },
  { name: 'delete with an address that is not one', category: 'invalid', setup: withDest, op: { kind: 'delete-dest', vs, rs: { ...rs, address: '10.10.1' } }, outcome: INVALID },
];

/** The categories each op kind must be tried with (NEW_* alone can answer "exists"). */
export const REQUIRED: Readonly<Record<IpvsOp['kind'], readonly Category[]>> = {
  'add-service': ['ok', 'exists', 'not found', 'invalid'],
  'update-service': ['ok', 'not found', 'invalid'],
  'delete-service': ['ok', 'not found', 'invalid'],
  'add-dest': ['ok', 'exists', 'not found', 'invalid'],
  'update-dest': ['ok', 'not found', 'invalid'],
  'delete-dest': ['ok', 'not found', 'invalid'],
};

/** The client's table as formatTable text (read back through its dumps, counters dropped). */
export async function tableOf(client: IpvsClient): Promise<string> {
  const table = new Map<string, { vs: VirtualServer; dests: Map<string, RealServer> }>();
  for (const v of await client.listVirtualServers()) {
    table.set(virtualServerKey(v), { vs: v, dests: new Map((await client.listRealServers(v)).map((r) => [realServerKey(r), r])) });
  }
  return formatTable(table);
}

/** What one case did on `client` (which must start empty): the op's error and the tables. */
export async function runCase(client: IpvsClient, c: ContractCase): Promise<{ setupErrors: unknown[]; error: unknown; before: string; after: string }> {
  const setupErrors = (await client.apply(c.setup)).filter((e) => e !== undefined);
  const before = await tableOf(client);
  const [error] = await client.apply([c.op]);
  return { setupErrors, error, before, after: await tableOf(client) };
}

/** Whether `error` is what the case expects; a message saying why not, else undefined. */
export function mismatch(c: ContractCase, error: unknown): string | undefined {
  const got = error instanceof IpvsError ? `${error.code} (${error.errno})` : String(error);
  if ('ok' in c.outcome) return error === undefined ? undefined : `expected success, got ${got}`;
  if ('invalid' in c.outcome) {
    return error instanceof IpvsError && error.code === 'EINVALARG' && isInvalidArgument(error) ? undefined : `expected EINVALARG, got ${got}`;
  }
  const { errno, is } = c.outcome;
  return error instanceof IpvsError && error.errno === errno && is(error) ? undefined : `expected errno ${errno}, got ${got}`;
}
