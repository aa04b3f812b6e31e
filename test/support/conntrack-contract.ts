// The conntrack contract: one table of ConntrackClient calls (list and delete x ok / not found /
// invalid) with the answer the kernel gives, run against FakeConntrack in the unit run
// (test/unit/conntrack/conntrack-contract.test.ts) and against NetlinkConntrack on the real kernel in the
// lab VM (test/kernel/conntrack-contract.test.ts). Where they disagree the fake is wrong. Each
// case starts with none of the contract's entries, inserts `setup` (which must succeed: the
// fake's seed, ctnetlink's create in the VM), then makes `call`, and checks the answer and the
// entries afterwards. Entry ids are the kernel's (random per entry): the table names them as
// `listed` (the id a list gives), `stale` (another one) or `none` (no CTA_ID sent), and answers
// print every id as `*`.
// Addresses: benchmarking space, 198.18.0.0/15 and 2001:2::/48 (clients .1.x, VIP .0.2, pods .2.x).
import type { ConntrackClient } from '../../src/conntrack/client.js';
import { type Flow, formatFlow, parseFlow } from '../../src/conntrack/codec.js';
import type { Family } from '../../src/model/addr.js';
import { NetlinkError, isInvalidArgument, isNotFound } from '../../src/netlink/errors.js';

/** Which id a deleted flow carries. */
export type IdRef = 'listed' | 'stale' | 'none';

/** One ConntrackClient call. */
export type CtCall =
  | { kind: 'list'; family: Family; proto?: number }
  | { kind: 'delete'; flows: ReadonlyArray<{ flow: string; id: IdRef }> };

/** The outcome categories every call is tried with (where the kernel has one). */
export type Category = 'ok' | 'not found' | 'invalid';

/** One row of the contract. */
export interface CtCase {
  name: string;
  category: Category;
  /** formatFlow lines (id=0): the entries present before the call. */
  setup: readonly string[];
  call: CtCall;
  /** `ok` and the listed entries one per line (list), `[- ENOENT]` (delete, `-` = deleted), or the code it rejected with. */
  answer: string;
  /** The contract's entries afterwards, as the answer prints them; undefined: unchanged. */
  after?: string;
}

const U4 = 'udp 198.18.1.1:40001 -> 198.18.0.2:53 reply 198.18.2.1:53 -> 198.18.1.1:40001 id=0 zone=0';
const U4B = 'udp 198.18.1.2:40002 -> 198.18.0.2:53 reply 198.18.2.2:53 -> 198.18.1.2:40002 id=0 zone=0';
const T4 = 'tcp 198.18.1.1:40003 -> 198.18.0.2:80 reply 198.18.2.1:80 -> 198.18.1.1:40003 id=0 zone=0';
const U6 = 'udp [2001:2::1:1]:40001 -> [2001:2::2]:53 reply [2001:2::2:1]:53 -> [2001:2::1:1]:40001 id=0 zone=0';
const Z7 = U4.replace('zone=0', 'zone=7');
/** U4 named from the other end: its reply tuple as the original one. */
const U4_REPLY = 'udp 198.18.2.1:53 -> 198.18.1.1:40001 reply 198.18.1.1:40001 -> 198.18.0.2:53 id=0 zone=0';

/** Lines as the answers print them: every id as `*` (the kernel's are random), sorted. */
const shown = (...lines: string[]) => lines.map((l) => l.replace(/ id=\d+ /, ' id=* ')).sort().join('\n');
const ok = (...lines: string[]) => (lines.length ? `ok\n${shown(...lines)}` : 'ok');
const del = (...flows: Array<[string, IdRef]>): CtCall => ({ kind: 'delete', flows: flows.map(([flow, id]) => ({ flow, id })) });
const all = [U4, U4B, T4, U6];

/** The contract, in the kernel's terms (nf_conntrack_netlink.c, Linux 6.1). */
export const CONTRACT: readonly CtCase[] = [
  // list (IPCTNL_MSG_CT_GET dump; with a protocol, CTA_FILTER)
  { name: 'list IPv4: every protocol of that family', category: 'ok', setup: all, call: { kind: 'list', family: 'IPv4' }, answer: ok(U4, U4B, T4) },
  { name: 'list IPv4 UDP', category: 'ok', setup: all, call: { kind: 'list', family: 'IPv4', proto: 17 }, answer: ok(U4, U4B) },
  { name: 'list IPv6 UDP', category: 'ok', setup: all, call: { kind: 'list', family: 'IPv6', proto: 17 }, answer: ok(U6) },
  { name: 'list SCTP when there is none', category: 'ok', setup: all, call: { kind: 'list', family: 'IPv4', proto: 132 }, answer: ok() },
  { name: 'list the same tuple in two zones: two entries', category: 'ok', setup: [U4, Z7], call: { kind: 'list', family: 'IPv4', proto: 17 }, answer: ok(U4, Z7) },
  { name: 'list with protocol 256', category: 'invalid', setup: all, call: { kind: 'list', family: 'IPv4', proto: 256 }, answer: 'EINVALARG' },

  // delete (IPCTNL_MSG_CT_DELETE by original tuple, zone, id)
  { name: 'delete by tuple and listed id', category: 'ok', setup: all, call: del([U4, 'listed']), answer: '[-]', after: shown(U4B, T4, U6) },
  { name: 'delete by tuple without an id', category: 'ok', setup: all, call: del([U6, 'none']), answer: '[-]', after: shown(U4, U4B, T4) },
  { name: 'delete naming the reply direction as the original tuple: the same entry goes', category: 'ok', setup: all,
    call: del([U4_REPLY, 'none']), answer: '[-]', after: shown(U4B, T4, U6) },
  { name: 'delete in zone 7: only that zone\'s entry goes', category: 'ok', setup: [U4, Z7], call: del([Z7, 'listed']), answer: '[-]', after: shown(U4) },
  { name: 'delete a batch of TCP and UDP', category: 'ok', setup: all, call: del([T4, 'listed'], [U4B, 'listed']), answer: '[- -]', after: shown(U4, U6) },
  { name: 'delete an entry that is not there', category: 'not found', setup: all, call: del([U4.replaceAll('40001', '40009'), 'none']), answer: '[ENOENT]' },
  { name: 'delete with the id of an entry gone and made again (stale)', category: 'not found', setup: all, call: del([U4, 'stale']), answer: '[ENOENT]' },
  { name: 'delete a zone-7 entry named in zone 0', category: 'not found', setup: [Z7], call: del([U4, 'none']), answer: '[ENOENT]' },
  { name: 'delete a UDP entry named as TCP', category: 'not found', setup: all, call: del([U4.replace('udp', 'tcp'), 'none']), answer: '[ENOENT]' },
  { name: 'delete the same entry twice in one batch', category: 'not found', setup: all, call: del([U4, 'listed'], [U4, 'listed']),
    answer: '[- ENOENT]', after: shown(U4B, T4, U6) },
  { name: 'delete an ICMP entry (no ports: refused before sending)', category: 'invalid', setup: all,
    call: del(['proto1 198.18.1.1:0 -> 198.18.0.2:0 reply 198.18.0.2:0 -> 198.18.1.1:0 id=0 zone=0', 'none']), answer: '[EINVALARG]' },
  { name: 'delete in zone 70000', category: 'invalid', setup: all, call: del([U4.replace('zone=0', 'zone=70000'), 'none']), answer: '[EINVALARG]' },
  { name: 'delete with port 70000', category: 'invalid', setup: all, call: del([U4.replace(':53 reply', ':70000 reply'), 'none']), answer: '[EINVALARG]' },
  { name: 'delete an IPv4 entry named with an IPv6 destination', category: 'invalid', setup: all,
    call: del([U4.replace('198.18.0.2:53', '[2001:2::2]:53'), 'none']), answer: '[EINVALARG]' },
  { name: 'delete a batch with a refused flow: the others go', category: 'invalid', setup: all,
    call: del([U4, 'listed'], [U4.replace('zone=0', 'zone=70000'), 'none'], [U6, 'listed']), answer: '[- EINVALARG -]', after: shown(U4B, T4) },
];

/** The categories each call must be tried with. */
export const REQUIRED: Readonly<Record<CtCall['kind'], readonly Category[]>> = {
  list: ['ok', 'invalid'],
  delete: ['ok', 'not found', 'invalid'],
};

/** Where the cases run: the client, and how the set-up's entries get there. */
export interface CtWorld {
  client: ConntrackClient;
  /** Inserts the entries; the answer per entry ('-' or a code), as delete's. */
  insert(flows: readonly Flow[]): Promise<string[]>;
}

/** A table line as a Flow; throws on a line the codec cannot read. */
export function flowOf(line: string): Flow {
  const f = parseFlow(line);
  if (!f) throw new Error(`not a flow line: ${line}`);
  return f;
}

const ours = (f: Flow) => [f.orig.src, f.orig.dst, f.reply.src, f.reply.dst].some((a) => a.startsWith('198.18.') || a.startsWith('2001:2::'));
const key = (f: Flow) => `${f.family} ${f.proto} ${f.zone} ${f.orig.src} ${f.orig.sport} ${f.orig.dst} ${f.orig.dport}`;
const swap = (f: Flow): Flow => ({ ...f, orig: f.reply, reply: f.orig });

/** The contract's entries of both families, as the answers print them. */
export async function entriesOf(client: ConntrackClient): Promise<Flow[]> {
  return [...await client.list('IPv4'), ...await client.list('IPv6')].filter(ours);
}

/** Runs one call; its answer as the table writes it, and every error it produced. */
export async function callOf(client: ConntrackClient, c: CtCall): Promise<{ answer: string; errors: unknown[] }> {
  try {
    if (c.kind === 'list') return { answer: ok(...(await client.list(c.family, c.proto)).filter(ours).map(formatFlow)), errors: [] };
    // The id as a list gives it: the entry with this tuple in either direction (the kernel's lookup).
    const present = await entriesOf(client);
    const flows = c.flows.map(({ flow, id }) => {
      const f = flowOf(flow);
      const have = present.find((p) => key(p) === key(f) || key(swap(p)) === key(f));
      const listed = have?.id ?? 0;
      return { ...f, id: id === 'none' ? 0 : id === 'listed' ? listed : ((listed ^ 0x5a5a5a5a) >>> 0) || 1 };
    });
    const rs = await client.delete(flows);
    return { answer: `[${rs.map((e) => e?.code ?? '-').join(' ')}]`, errors: rs.filter((e) => e) };
  } catch (e) {
    return { answer: e instanceof NetlinkError ? e.code : `not a NetlinkError: ${String(e)}`, errors: [e] };
  }
}

/** What one case did in `world` (holding none of the contract's entries): set-up failures, the answer, the entries before and after. */
export async function runCase(world: CtWorld, c: CtCase): Promise<{ setupFailures: string[]; answer: string; errors: unknown[]; before: string; after: string }> {
  const inserted = await world.insert(c.setup.map(flowOf));
  const setupFailures = inserted.flatMap((a, i) => (a === '-' ? [] : [`${c.setup[i]}: ${a}`]));
  const before = shown(...(await entriesOf(world.client)).map(formatFlow));
  const { answer, errors } = await callOf(world.client, c.call);
  return { setupFailures, answer, errors, before, after: shown(...(await entriesOf(world.client)).map(formatFlow)) };
}

/** Errors whose predicates do not match their code: isNotFound only for ENOENT, isInvalidArgument only for EINVALARG/EINVAL. */
export function predicateMismatches(errors: readonly unknown[]): string[] {
  return errors.flatMap((e) => {
    if (!(e instanceof NetlinkError)) return [`not a NetlinkError: ${String(e)}`];
    const got = { notFound: isNotFound(e), invalid: isInvalidArgument(e) };
    const want = { notFound: e.code === 'ENOENT', invalid: e.code === 'EINVALARG' || e.code === 'EINVAL' };
    return JSON.stringify(got) === JSON.stringify(want) ? [] : [`${e.code}: predicates ${JSON.stringify(got)}`];
  });
}
