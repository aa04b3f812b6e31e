// The iptables/ipset contract (test/support/iptables-contract.ts) against the real binaries (nft
// backend); the same table runs against FakeHost in test/unit/iptables/iptables-contract.test.ts. The
// guest's root netns: every case starts without the contract's chains, jumps and sets (CTC-*),
// removed by name as the operator's cleanup does, and none are left behind. A case reads back only
// what its tools wrote (a save is a process per tool under TCG): the leftovers the next case clears.
import { afterAll, beforeEach, describe, expect, it } from '@jest/globals';
import { spawnRunner } from '../../src/iptables/restore.js';
import { parseSave } from '../../src/iptables/save.js';
import { expectCase } from '../support/contract.js';
import { ARGV, CONTRACT, runCase, sectionsOf } from '../support/iptables-contract.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

const run = spawnRunner;
/** A case's final dump, when the case ran to its end: the next clear() starts from it instead of a new one. */
let last: string | undefined;
/** The latest dump of the running case. */
let latest: string | undefined;
const SAVE = { iptables: 'iptables-nft-save', ip6tables: 'ip6tables-nft-save', ipset: 'ipset save' } as const;
/** The dumps of `tools` (default all) from one shell. */
const dump = async (tools: ReadonlySet<keyof typeof SAVE> = new Set(['iptables', 'ip6tables', 'ipset'] as const)) =>
  (latest = (await run('sh', ['-c', [...tools].map((t) => `echo "#${t}"; ${SAVE[t]}`).join('; ')])).stdout);

/** Removes every CTC-* jump, chain and set: rules first, then sets (a set a rule names cannot go). */
async function clear(): Promise<void> {
  const text = last ?? await dump();
  last = undefined;
  const { iptables: v4, ip6tables: v6, ipset: sets } = sectionsOf(text);
  for (const [tool, text] of [['iptables', v4], ['ip6tables', v6]] as const) {
    const lines: string[] = [];
    for (const [table, t] of parseSave(text)) {
      const ours = [...t.chains].filter((c) => c.startsWith('CTC-'));
      const jumps = t.rules.filter((r) => !r.split(' ')[1]!.startsWith('CTC-') && r.includes('CTC-'));
      if (ours.length || jumps.length) lines.push(`*${table}`, ...jumps.map((r) => `-D ${r.slice(3)}`), ...ours.map((c) => `:${c} - [0:0]`), ...ours.map((c) => `-X ${c}`), 'COMMIT');
    }
    if (lines.length) expect((await run(ARGV[tool][0], ARGV[tool].slice(1), `${lines.join('\n')}\n`)).stderr).toBe('');
  }
  const names = sets.split('\n').map((l) => l.split(' ')).filter(([op, n]) => op === 'create' && n?.startsWith('CTC-')).map(([, n]) => n!);
  if (names.length) expect((await run('ipset', ['restore'], names.map((n) => `destroy ${n}\n`).join(''))).stderr).toBe('');
}

beforeEach(clear);
afterAll(clear);

describe('iptables/ipset contract: the real tools', () => {
  it.each(CONTRACT.map((c) => [`${c.call.tool}: ${c.name}`, c] as const))('%s', async (_name, c) => {
    const r = await runCase({ run, dump }, c);
    last = latest; // runCase's final step is its dump: nothing ran after it
    // The tool's words, shown whatever the answer: what the fake's messages imitate.
    console.log(`${c.name}: ${r.answer}${r.stderr ? `: ${r.stderr}` : ''}`);
    expectCase(r, c);
  });
});
