// The iptables/ipset contract: one table of the commands the operator runs (iptables-restore and
// ip6tables-restore --noflush, ipset restore -exist; nft backend) with the answer the real tools
// give, run against FakeHost in the unit run (test/unit/iptables/iptables-contract.test.ts) and against
// the real binaries in the lab VM (test/kernel/iptables-contract.test.ts). Where they disagree the
// fake is wrong. Each case starts with none of the contract's chains (CTC-*) and sets, runs
// `setup` (which must succeed), then `call`, and checks the exit status and our chains, jumps and
// sets afterwards. Rules are written as iptables-save prints them, so both sides echo them alike.
// Addresses: VIPs 10.200.1.0/24 and fd00:200::/64.
import type { Runner } from '../../src/iptables/exec.js';
import { parseSave } from '../../src/iptables/save.js';

/** One command as the operator runs it. */
export interface IptCall {
  tool: 'iptables' | 'ip6tables' | 'ipset';
  input: string;
}

/** The outcome categories every tool is tried with. */
export type Category = 'ok' | 'exists' | 'not found' | 'invalid';

/** One row of the contract. */
export interface IptCase {
  name: string;
  category: Category;
  setup: readonly IptCall[];
  call: IptCall;
  /** `ok` (exit 0) or `fails` (non-zero: the tools' words differ, the fake's are its own). */
  answer: 'ok' | 'fails';
  /** Our chains, jumps and sets afterwards as formatState writes them; undefined: unchanged. */
  after?: string;
}

/** argv of each tool, as IptablesRestore and ipset.ts run them. */
export const ARGV: Readonly<Record<IptCall['tool'], readonly [string, ...string[]]>> = {
  iptables: ['iptables-nft-restore', '--noflush', '--wait=5'],
  ip6tables: ['ip6tables-nft-restore', '--noflush', '--wait=5'],
  ipset: ['ipset', 'restore', '-exist'],
};

const ipt = (...lines: string[]): IptCall => ({ tool: 'iptables', input: `${lines.join('\n')}\n` });
const ip6t = (...lines: string[]): IptCall => ({ tool: 'ip6tables', input: `${lines.join('\n')}\n` });
const ipset = (...lines: string[]): IptCall => ({ tool: 'ipset', input: `${lines.join('\n')}\n` });

const SET_A = 'create CTC-A hash:ip family inet hashsize 1024 maxelem 65536';
const SET_P = 'create CTC-P hash:ip,port family inet hashsize 1024 maxelem 65536';
/** nat: chain CTC-SVC hooked into PREROUTING, one rule. */
const withChain = [ipt('*nat', ':CTC-SVC - [0:0]', '-A PREROUTING -j CTC-SVC', '-A CTC-SVC -j RETURN', 'COMMIT')];
const CHAIN_STATE = 'v4 nat :CTC-SVC\nv4 nat -A PREROUTING -j CTC-SVC\nv4 nat -A CTC-SVC -j RETURN';
const withSet = [ipset(SET_A, 'add CTC-A 10.200.1.1')];

/** The contract, in the tools' terms (iptables 1.8.9 nft, ipset 7; Linux 6.1). */
export const CONTRACT: readonly IptCase[] = [
  // iptables-restore --noflush: all or nothing per run
  { name: 'declare a chain, hook it, fill it', category: 'ok', setup: [], call: withChain[0]!, answer: 'ok', after: CHAIN_STATE },
  { name: 'declare an existing chain again: only it is flushed', category: 'exists',
    setup: [...withChain, ipt('*nat', ':CTC-OTHER - [0:0]', '-A CTC-OTHER -j RETURN', 'COMMIT')],
    call: ipt('*nat', ':CTC-SVC - [0:0]', '-A CTC-SVC -s 10.10.0.0/16 -j RETURN', 'COMMIT'), answer: 'ok',
    after: 'v4 nat :CTC-OTHER\nv4 nat :CTC-SVC\nv4 nat -A PREROUTING -j CTC-SVC\nv4 nat -A CTC-OTHER -j RETURN\nv4 nat -A CTC-SVC -s 10.10.0.0/16 -j RETURN' },
  { name: 'insert a jump above the others', category: 'ok', setup: withChain,
    call: ipt('*nat', ':CTC-B - [0:0]', '-I PREROUTING -j CTC-B', 'COMMIT'), answer: 'ok',
    after: 'v4 nat :CTC-B\nv4 nat :CTC-SVC\nv4 nat -A PREROUTING -j CTC-B\nv4 nat -A PREROUTING -j CTC-SVC\nv4 nat -A CTC-SVC -j RETURN' },
  { name: 'match a set that exists', category: 'ok', setup: withSet,
    call: ipt('*filter', ':CTC-IN - [0:0]', '-A CTC-IN -m set --match-set CTC-A dst -j ACCEPT', 'COMMIT'), answer: 'ok',
    after: 'v4 filter :CTC-IN\nv4 filter -A CTC-IN -m set --match-set CTC-A dst -j ACCEPT\nset CTC-A hash:ip 10.200.1.1' },
  { name: 'clean up: delete the jump, flush and delete the chain', category: 'ok', setup: withChain,
    call: ipt('*nat', '-D PREROUTING -j CTC-SVC', ':CTC-SVC - [0:0]', '-X CTC-SVC', 'COMMIT'), answer: 'ok', after: '' },
  { name: 'an IPv6 chain is apart from the IPv4 ones', category: 'ok', setup: withChain,
    call: ip6t('*nat', ':CTC-SVC - [0:0]', '-A CTC-SVC -d fd00:200::1/128 -j RETURN', 'COMMIT'), answer: 'ok',
    after: `${CHAIN_STATE}\nv6 nat :CTC-SVC\nv6 nat -A CTC-SVC -d fd00:200::1/128 -j RETURN` },
  { name: 'append to a missing chain: nothing of the run stays', category: 'not found', setup: [],
    call: ipt('*nat', ':CTC-NEW - [0:0]', '-A CTC-NEW -j RETURN', '-A CTC-MISSING -j RETURN', 'COMMIT'), answer: 'fails', after: '' },
  { name: 'jump to a missing chain', category: 'not found', setup: [], call: ipt('*nat', ':CTC-NEW - [0:0]', '-A CTC-NEW -j CTC-MISSING', 'COMMIT'), answer: 'fails' },
  { name: 'delete a rule that is not there', category: 'not found', setup: withChain, call: ipt('*nat', '-D PREROUTING -j CTC-OTHER', 'COMMIT'), answer: 'fails' },
  { name: 'match a missing set', category: 'not found', setup: [],
    call: ipt('*filter', ':CTC-IN - [0:0]', '-A CTC-IN -m set --match-set CTC-NONE dst -j ACCEPT', 'COMMIT'), answer: 'fails' },
  { name: 'delete a chain a jump still names', category: 'invalid', setup: withChain, call: ipt('*nat', ':CTC-SVC - [0:0]', '-X CTC-SVC', 'COMMIT'), answer: 'fails' },
  { name: 'delete an empty built-in chain: nft lets it go (and makes it again when used)', category: 'ok', setup: [],
    call: ipt('*nat', '-X PREROUTING', 'COMMIT'), answer: 'ok' },
  { name: 'a table that does not exist', category: 'invalid', setup: [], call: ipt('*bogus', ':CTC-X - [0:0]', 'COMMIT'), answer: 'fails', after: '' },
  { name: 'a run without COMMIT: nothing of it stays', category: 'invalid', setup: [], call: ipt('*nat', ':CTC-NEW - [0:0]', '-A CTC-NEW -j RETURN'), answer: 'fails', after: '' },

  // ipset restore -exist: line by line, stops at the first error and keeps what ran
  { name: 'create and fill a set', category: 'ok', setup: [], call: ipset(SET_A, 'add CTC-A 10.200.1.1', 'add CTC-A 10.200.1.2'), answer: 'ok',
    after: 'set CTC-A hash:ip 10.200.1.1 10.200.1.2' },
  { name: 'fill a temporary set, swap it in, destroy the old one', category: 'ok', setup: withSet,
    call: ipset(SET_A.replace('CTC-A', 'CTC-A-tmp'), 'add CTC-A-tmp 10.200.1.7', 'swap CTC-A-tmp CTC-A', 'destroy CTC-A-tmp'), answer: 'ok',
    after: 'set CTC-A hash:ip 10.200.1.7' },
  { name: 'an ip,port set', category: 'ok', setup: [], call: ipset(SET_P, 'add CTC-P 10.200.1.1,tcp:80'), answer: 'ok', after: 'set CTC-P hash:ip,port 10.200.1.1,tcp:80' },
  { name: 'members print in the kernel\'s form (host bits cleared, no /32, IPv6 compressed)', category: 'ok', setup: [],
    call: ipset('create CTC-N hash:ip,port,net family inet hashsize 1024 maxelem 65536', 'add CTC-N 10.200.1.1,tcp:80,198.51.100.7/24',
      'add CTC-N 10.200.1.1,udp:53,198.51.100.7/32', 'create CTC-6 hash:ip,port,ip family inet6 hashsize 1024 maxelem 65536',
      'add CTC-6 fd00:200:0::0001,sctp:80,FD00:10::0:2'), answer: 'ok',
    after: 'set CTC-6 hash:ip,port,ip fd00:200::1,sctp:80,fd00:10::2\nset CTC-N hash:ip,port,net 10.200.1.1,tcp:80,198.51.100.0/24 10.200.1.1,udp:53,198.51.100.7' },
  { name: 'delete a member', category: 'ok', setup: [ipset(SET_A, 'add CTC-A 10.200.1.1', 'add CTC-A 10.200.1.2')],
    call: ipset('del CTC-A 10.200.1.1'), answer: 'ok', after: 'set CTC-A hash:ip 10.200.1.2' },
  { name: 'delete a member that is not there: no error with -exist', category: 'not found', setup: withSet,
    call: ipset('del CTC-A 10.200.1.9'), answer: 'ok', after: 'set CTC-A hash:ip 10.200.1.1' },
  { name: 'add past maxelem: the set is full', category: 'invalid', setup: [ipset(SET_A.replace('65536', '1'), 'add CTC-A 10.200.1.1')],
    call: ipset('add CTC-A 10.200.1.2'), answer: 'fails' },
  { name: 'swap sets of different families', category: 'invalid', setup: [...withSet, ipset('create CTC-A6 hash:ip family inet6')],
    call: ipset('swap CTC-A CTC-A6'), answer: 'fails' },
  { name: 'create an existing set of the same kind, add a present member', category: 'exists', setup: withSet,
    call: ipset(SET_A, 'add CTC-A 10.200.1.1'), answer: 'ok' },
  { name: 'create an existing set of another type', category: 'exists', setup: withSet, call: ipset(SET_P.replace('CTC-P', 'CTC-A')), answer: 'fails' },
  { name: 'create an existing set with another maxelem', category: 'exists', setup: withSet, call: ipset(SET_A.replace('65536', '131072')), answer: 'fails' },
  { name: 'add to a missing set: the lines before it stay', category: 'not found', setup: [],
    call: ipset(SET_A, 'add CTC-NONE 10.200.1.1', 'add CTC-A 10.200.1.1'), answer: 'fails', after: 'set CTC-A hash:ip' },
  { name: 'swap with a missing set', category: 'not found', setup: withSet, call: ipset('swap CTC-A CTC-NONE'), answer: 'fails' },
  { name: 'destroy a missing set: no error with -exist', category: 'not found', setup: [], call: ipset('destroy CTC-NONE'), answer: 'ok' },
  { name: 'destroy a set a rule matches', category: 'invalid', setup: [...withSet, ipt('*filter', ':CTC-IN - [0:0]', '-A CTC-IN -m set --match-set CTC-A dst -j ACCEPT', 'COMMIT')],
    call: ipset('destroy CTC-A'), answer: 'fails' },
  { name: 'swap sets of different types', category: 'invalid', setup: [...withSet, ipset(SET_P)], call: ipset('swap CTC-A CTC-P'), answer: 'fails' },
  { name: 'create a set of a type that does not exist', category: 'invalid', setup: [], call: ipset('create CTC-X hash:bogus family inet'), answer: 'fails', after: '' },
  { name: 'add a member that is not an address', category: 'invalid', setup: withSet, call: ipset('add CTC-A 10.200.1.300'), answer: 'fails' },
  { name: 'add an IPv6 member to an inet set', category: 'invalid', setup: withSet, call: ipset('add CTC-A fd00:200::1'), answer: 'fails' },
];

/** The categories each tool must be tried with. */
export const REQUIRED: Readonly<Record<'iptables' | 'ipset', readonly Category[]>> = {
  iptables: ['ok', 'exists', 'not found', 'invalid'],
  ipset: ['ok', 'exists', 'not found', 'invalid'],
};

/** Where the cases run: a Runner, and the text that formatState reads. */
export interface IptWorld {
  run: Runner;
  /**
   * The host's iptables-save (v4), ip6tables-save and ipset save, each after its `#iptables`,
   * `#ip6tables` or `#ipset` line; only those of `tools` (a case reads what its tools wrote).
   */
  dump(tools: ReadonlySet<IptCall['tool']>): Promise<string>;
}

/** The sections of a dump by tool ('' for one it does not hold). */
export function sectionsOf(dump: string): Record<IptCall['tool'], string> {
  const out = { iptables: '', ip6tables: '', ipset: '' };
  for (const part of dump.split(/^#(?=(?:iptables|ip6tables|ipset)$)/m)) {
    const nl = part.indexOf('\n');
    const tool = (nl < 0 ? part : part.slice(0, nl)) as IptCall['tool'];
    if (tool in out) out[tool] = nl < 0 ? '' : part.slice(nl + 1);
  }
  return out;
}

/**
 * Our chains (declared, sorted by name), our rules and the built-in chains' rules that name ours
 * (in chain order), per family and table; then our sets with their type and sorted members. One
 * line each: `v4 nat :CTC-SVC`, `v4 nat -A PREROUTING -j CTC-SVC`, `set CTC-A hash:ip 10.200.1.1`.
 */
export function formatState(dump: string): string {
  const { iptables: v4, ip6tables: v6, ipset: sets } = sectionsOf(dump);
  const out: string[] = [];
  for (const [family, text] of [['v4', v4], ['v6', v6]] as const) {
    for (const [table, t] of [...parseSave(text)].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const chains = [...t.chains].filter((c) => c.startsWith('CTC-')).sort();
      out.push(...chains.map((c) => `${family} ${table} :${c}`));
      const rules = t.rules.filter((r) => r.includes('CTC-'));
      const chainOf = (r: string) => r.split(' ')[1]!;
      const order = [...new Set(rules.map(chainOf))].sort((a, b) => (a.startsWith('CTC-') === b.startsWith('CTC-') ? (a < b ? -1 : 1) : a.startsWith('CTC-') ? 1 : -1));
      for (const c of order) out.push(...rules.filter((r) => chainOf(r) === c).map((r) => `${family} ${table} ${r}`));
    }
  }
  const members = new Map<string, { type: string; members: string[] }>();
  for (const line of sets.split('\n')) {
    const [op, name, arg] = line.trim().split(/\s+/);
    if (!name?.startsWith('CTC-')) continue;
    if (op === 'create') members.set(name, { type: arg!, members: [] });
    else if (op === 'add') members.get(name)?.members.push(arg!);
  }
  for (const [name, s] of [...members].sort(([a], [b]) => (a < b ? -1 : 1))) out.push([`set ${name} ${s.type}`, ...s.members.sort()].join(' '));
  return out.join('\n');
}

/** Runs one call; `ok` or `fails`, and the tool's stderr for the test's message. */
export async function callOf(run: Runner, c: IptCall): Promise<{ answer: 'ok' | 'fails'; stderr: string }> {
  const [cmd, ...args] = ARGV[c.tool];
  const r = await run(cmd, args, c.input);
  return { answer: r.code === 0 ? 'ok' : 'fails', stderr: r.stderr.trim() };
}

/** What one case did in `world` (holding none of ours): set-up failures, the answer, the states before ('' when `after` is given) and after. */
export async function runCase(world: IptWorld, c: IptCase): Promise<{ setupFailures: string[]; answer: string; stderr: string; before: string; after: string }> {
  const tools = new Set([...c.setup, c.call].map((x) => x.tool));
  const setupFailures: string[] = [];
  for (const s of c.setup) {
    const r = await callOf(world.run, s);
    if (r.answer !== 'ok') setupFailures.push(`${s.tool}: ${r.stderr}`);
  }
  // Read only when the case expects no change (each dump is a process per tool in the VM).
  const before = c.after === undefined ? formatState(await world.dump(tools)) : '';
  const { answer, stderr } = await callOf(world.run, c.call);
  return { setupFailures, answer, stderr, before, after: formatState(await world.dump(tools)) };
}
