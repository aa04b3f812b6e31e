// The VIP link contract: one table of VipLink calls (every method x ok / exists / not found /
// invalid) with the answer the real link gives, run against FakeVipLink in the unit run
// (test/unit/rtnl/vip-contract.test.ts) and against RtnlVipLink on the real kernel in the lab VM
// (test/kernel/vip-contract.test.ts). Where they disagree the fake is wrong. Each case starts with
// no dummy link and a veth VETH without addresses, applies `setup` (which must succeed), then
// `call`, and checks the answer and the links' addresses afterwards.
// Addresses: VIPs 10.200.1.0/24 and fd00:200::/64; odd ones only where the kernel treats them apart.
import { NetlinkError, isExists, isInvalidArgument, isNotFound } from '../../src/netlink/errors.js';
import { isForeignLink } from '../../src/rtnl/errors.js';
import type { VipLink } from '../../src/rtnl/vips.js';

/** The dummy link the cases use. */
export const LINK = 'vipc-dummy0';
/** A link of another kind (a veth) that exists in every case: the link refuses to own it. */
export const VETH = 'vipc-veth0';
/** A name no link has. */
export const MISSING = 'vipc-none0';

/** One VipLink call. */
export type VipCall =
  | { kind: 'ensure' | 'list'; name: string }
  | { kind: 'add' | 'remove'; name: string; address: string }
  | { kind: 'addMany' | 'removeMany'; name: string; addresses: readonly string[] };

/** The outcome categories every method is tried with (where the kernel has one). */
export type Category = 'ok' | 'exists' | 'not found' | 'invalid';

/** One row of the contract. */
export interface VipCase {
  name: string;
  category: Category;
  setup: readonly VipCall[];
  call: VipCall;
  /**
   * The answer as formatAnswer writes it: `ok`, `ok [a b]` (list, sorted), `[- EEXIST]` (a batch's
   * per-address codes, `-` = done), or the code the call rejected with (`ENODEV`, `EFOREIGNLINK`).
   */
  answer: string;
  /** The links' addresses afterwards as formatState text; undefined: unchanged from after `setup`. */
  after?: string;
}

const ensure: VipCall = { kind: 'ensure', name: LINK };
const add = (address: string, name = LINK): VipCall => ({ kind: 'add', name, address });
const remove = (address: string, name = LINK): VipCall => ({ kind: 'remove', name, address });
const addMany = (addresses: readonly string[], name = LINK): VipCall => ({ kind: 'addMany', name, addresses });
const removeMany = (addresses: readonly string[], name = LINK): VipCall => ({ kind: 'removeMany', name, addresses });
const list = (name = LINK): VipCall => ({ kind: 'list', name });

const V4 = '10.200.1.1';
const V6 = 'fd00:200::1';
const withLink = [ensure];
const withBoth = [ensure, add(V4), add(V6)];
/** formatState of the dummy holding `addrs` (and the empty veth). */
const on = (...addrs: string[]) => `${LINK}: ${addrs.join(' ')}\n${VETH}:`.replace(': \n', ':\n');

/** The contract, in the kernel's terms (devinet.c, addrconf.c, rtnetlink.c; Linux 6.1). */
export const CONTRACT: readonly VipCase[] = [
  // ensure: create the dummy (once) and set it up
  { name: 'create the link', category: 'ok', setup: [], call: ensure, answer: 'ok', after: on() },
  { name: 'ensure an existing link: its addresses stay', category: 'exists', setup: withBoth, call: ensure, answer: 'ok' },
  { name: 'ensure a link of another kind', category: 'invalid', setup: [], call: { kind: 'ensure', name: VETH }, answer: 'EFOREIGNLINK' },
  { name: 'ensure a name longer than IFNAMSIZ - 1', category: 'invalid', setup: [], call: { kind: 'ensure', name: 'vipc-sixteen-ch0' }, answer: 'ERANGE' },

  // list: the link's addresses, without the kernel's own link-local one
  { name: 'list both families', category: 'ok', setup: withBoth, call: list(), answer: `ok [${V4} ${V6}]` },
  { name: 'list a link without addresses', category: 'ok', setup: withLink, call: list(), answer: 'ok []' },
  { name: 'list a missing link', category: 'not found', setup: [], call: list(MISSING), answer: 'ok []' },
  { name: 'list a link of another kind', category: 'invalid', setup: [], call: list(VETH), answer: 'EFOREIGNLINK' },

  // add (RTM_NEWADDR, create|excl)
  { name: 'add an IPv4 address', category: 'ok', setup: withLink, call: add(V4), answer: 'ok', after: on(V4) },
  { name: 'add an IPv6 address written long and in capitals', category: 'ok', setup: withLink, call: add('FD00:200:0:0::1'), answer: 'ok', after: on(V6) },
  { name: 'add an IPv6 link-local address: on the link, but list leaves it out', category: 'ok', setup: withLink,
    call: add('fe80::5'), answer: 'ok', after: on('fe80::5') },
  { name: 'add 0.0.0.0: the kernel answers ok and adds nothing', category: 'ok', setup: withLink, call: add('0.0.0.0'), answer: 'ok', after: on() },
  { name: 'add to a link of another kind (add does not check the kind)', category: 'ok', setup: withLink,
    call: add(V4, VETH), answer: 'ok', after: `${LINK}:\n${VETH}: ${V4}` },
  { name: 'add a present address', category: 'exists', setup: withBoth, call: add(V4), answer: 'EEXIST' },
  { name: 'add a present IPv6 address in another spelling', category: 'exists', setup: withBoth, call: add('FD00:200::0:1'), answer: 'EEXIST' },
  { name: 'add to a missing link', category: 'not found', setup: [], call: add(V4, MISSING), answer: 'ENODEV' },
  { name: 'add something that is not an address', category: 'invalid', setup: withLink, call: add('10.200.1'), answer: 'EINVALARG' },
  { name: 'add the IPv6 unspecified address', category: 'invalid', setup: withLink, call: add('::'), answer: 'EADDRNOTAVAIL' },
  { name: 'add an IPv6 multicast address', category: 'invalid', setup: withLink, call: add('ff02::1'), answer: 'EADDRNOTAVAIL' },
  { name: 'add the IPv6 loopback address to a dummy', category: 'invalid', setup: withLink, call: add('::1'), answer: 'EADDRNOTAVAIL' },

  // remove (RTM_DELADDR)
  { name: 'remove an IPv4 address', category: 'ok', setup: withBoth, call: remove(V4), answer: 'ok', after: on(V6) },
  { name: 'remove an IPv6 address in another spelling', category: 'ok', setup: withBoth, call: remove('fd00:200:0::1'), answer: 'ok', after: on(V4) },
  { name: 'remove an absent address', category: 'not found', setup: withBoth, call: remove('10.200.1.9'), answer: 'EADDRNOTAVAIL' },
  { name: 'remove 0.0.0.0 after adding it', category: 'not found', setup: [ensure, add('0.0.0.0')], call: remove('0.0.0.0'), answer: 'EADDRNOTAVAIL' },
  { name: 'remove from a missing link', category: 'not found', setup: [], call: remove(V4, MISSING), answer: 'ENODEV' },
  { name: 'remove something that is not an address', category: 'invalid', setup: withBoth, call: remove('fd00:200::1::2'), answer: 'EINVALARG' },

  // addMany: one result per address, in order; the link is looked up once
  { name: 'add a batch: refusals do not stop the others', category: 'exists', setup: withBoth,
    call: addMany(['10.200.1.2', V4, 'fd00:200::2', 'x', '10.200.1.2', '::']),
    answer: '[- EEXIST - EINVALARG EEXIST EADDRNOTAVAIL]', after: on(V4, '10.200.1.2', V6, 'fd00:200::2') },
  { name: 'add an empty batch to a missing link', category: 'ok', setup: [], call: addMany([], MISSING), answer: '[]' },
  { name: 'add a batch to a missing link', category: 'not found', setup: [], call: addMany([V4, 'x'], MISSING), answer: 'ENODEV' },
  { name: 'add a batch of non-addresses to a missing link: nothing to send', category: 'invalid', setup: [],
    call: addMany(['x', '10.200.1.256'], MISSING), answer: '[EINVALARG EINVALARG]' },

  // removeMany
  { name: 'remove a batch: absent ones answer EADDRNOTAVAIL', category: 'not found', setup: withBoth,
    call: removeMany([V4, '10.200.1.9', 'FD00:200::1', V4, 'x']), answer: '[- EADDRNOTAVAIL - EADDRNOTAVAIL EINVALARG]', after: on() },
  { name: 'remove an empty batch from a missing link', category: 'ok', setup: [], call: removeMany([], MISSING), answer: '[]' },
  { name: 'remove a batch from a missing link', category: 'not found', setup: [], call: removeMany([V4], MISSING), answer: 'ENODEV' },
  { name: 'remove a batch of non-addresses from a missing link', category: 'invalid', setup: [], call: removeMany(['x'], MISSING), answer: '[EINVALARG]' },
];

/** The categories each method must be tried with. */
export const REQUIRED: Readonly<Record<VipCall['kind'], readonly Category[]>> = {
  ensure: ['ok', 'exists', 'invalid'],
  list: ['ok', 'not found', 'invalid'],
  add: ['ok', 'exists', 'not found', 'invalid'],
  remove: ['ok', 'not found', 'invalid'],
  addMany: ['ok', 'exists', 'not found', 'invalid'],
  removeMany: ['ok', 'not found', 'invalid'],
};

/** Where the cases run: the link, the links' addresses read apart from it, and a reset. */
export interface VipWorld {
  link: VipLink;
  /** Each existing contract link (LINK, VETH) as `name: addr ...`, addresses sorted, one per line. */
  state(): Promise<string>;
}

/** formatState's text from name -> addresses. */
export function formatState(links: ReadonlyMap<string, Iterable<string>>): string {
  return [...links].sort(([a], [b]) => (a < b ? -1 : 1)).map(([n, as]) => [`${n}:`, ...[...as].sort()].join(' ')).join('\n');
}

/** Runs one call; its answer as the table writes it, and every error it produced. */
export async function callOf(link: VipLink, c: VipCall): Promise<{ answer: string; errors: unknown[] }> {
  const codes = (rs: readonly (NetlinkError | undefined)[]) => `[${rs.map((e) => e?.code ?? '-').join(' ')}]`;
  try {
    switch (c.kind) {
      case 'ensure': await link.ensure(c.name); return { answer: 'ok', errors: [] };
      case 'list': return { answer: `ok [${(await link.list(c.name)).sort().join(' ')}]`, errors: [] };
      case 'add': await link.add(c.name, c.address); return { answer: 'ok', errors: [] };
      case 'remove': await link.remove(c.name, c.address); return { answer: 'ok', errors: [] };
      case 'addMany': case 'removeMany': {
        const rs = await (c.kind === 'addMany' ? link.addMany(c.name, c.addresses) : link.removeMany(c.name, c.addresses));
        return { answer: codes(rs), errors: rs.filter((e) => e) };
      }
    }
  } catch (e) {
    return { answer: e instanceof NetlinkError ? e.code : `not a NetlinkError: ${String(e)}`, errors: [e] };
  }
}

/** What one case did in `world` (fresh): the setup's answers that were not ok, the answer, the states. */
export async function runCase(world: VipWorld, c: VipCase): Promise<{ setupFailures: string[]; answer: string; errors: unknown[]; before: string; after: string }> {
  const setupFailures: string[] = [];
  for (const s of c.setup) {
    const { answer } = await callOf(world.link, s);
    if (answer !== 'ok' && !/^\[-( -)*\]$/.test(answer)) setupFailures.push(`${s.kind}: ${answer}`);
  }
  const before = await world.state();
  const { answer, errors } = await callOf(world.link, c.call);
  return { setupFailures, answer, errors, before, after: await world.state() };
}

/**
 * Errors whose predicates do not match their code (callers test errors with predicates, never by
 * message): isExists only for EEXIST, isForeignLink only for EFOREIGNLINK, isInvalidArgument for
 * EINVALARG and EINVAL, isNotFound for none of the VIP link's errors (ENODEV and EADDRNOTAVAIL).
 */
export function predicateMismatches(errors: readonly unknown[]): string[] {
  return errors.flatMap((e) => {
    if (!(e instanceof NetlinkError)) return [`not a NetlinkError: ${String(e)}`];
    const got = { exists: isExists(e), foreign: isForeignLink(e), invalid: isInvalidArgument(e), notFound: isNotFound(e) };
    const want = { exists: e.code === 'EEXIST', foreign: e.code === 'EFOREIGNLINK', invalid: e.code === 'EINVALARG' || e.code === 'EINVAL', notFound: false };
    return JSON.stringify(got) === JSON.stringify(want) ? [] : [`${e.code}: predicates ${JSON.stringify(got)}`];
  });
}
