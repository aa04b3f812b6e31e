// The conntrack cleanup's list asks the kernel for UDP entries only (ctnetlink CTA_FILTER, Linux
// >= 5.8; the lab kernel is 6.1), so its cost does not grow with the TCP entries in the table.
// conntrack(8) is the oracle: it inserts the entries and lists the UDP ones (`-L -p udp`). Cost is
// counted in entries and bytes the kernel sent, not in time. The guest's root network namespace:
// kernel tests run one at a time, and every entry made here (198.18.0.0/15, benchmarking space)
// is deleted again.
import { afterAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { NetlinkConntrack } from '../../src/conntrack/client.js';
import { IPPROTO_UDP } from '../../src/conntrack/constants.js';
import { formatFlow } from '../../src/conntrack/codec.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

// conntrack -I is one process per entry: a fraction of a second each under TCG, so few entries.
const TCP_ENTRIES = 60;
const UDP_ENTRIES = 3;
const ct = new NetlinkConntrack();

/** Inserts `n` entries with conntrack(8), one shell for all (a process per entry is what costs). */
function insert(proto: 'tcp' | 'udp', n: number, src: string, dport: number): void {
  const state = proto === 'tcp' ? '--state ESTABLISHED' : '';
  execFileSync('bash', ['-c', `for i in $(seq 1 ${n}); do conntrack -I -p ${proto} -s ${src} -d 198.18.0.2 --sport $((20000+i)) --dport ${dport} ${state} -t 600 -u SEEN_REPLY,ASSURED 2>/dev/null || exit 1; done`]);
}

/** conntrack -L -p udp of the entries made here, as sorted "src:sport -> dst:dport" lines. */
function oracleUdp(): string[] {
  const out = execFileSync('conntrack', ['-L', '-p', 'udp', '-d', '198.18.0.2'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  return out.split('\n').filter(Boolean).map((l) => {
    const f = (k: string) => new RegExp(`${k}=(\\S+)`).exec(l)![1];
    return `${f('src')}:${f('sport')} -> ${f('dst')}:${f('dport')}`;
  }).sort();
}

afterAll(() => {
  for (const p of ['tcp', 'udp']) execFileSync('bash', ['-c', `conntrack -D -p ${p} -d 198.18.0.2 >/dev/null 2>&1 || true`]);
  ct.close();
});

describe('conntrack list for UDP (kernel-side filter)', () => {
  it('returns only UDP entries, as conntrack -L -p udp does, and its cost ignores TCP entries', async () => {
    insert('udp', UDP_ENTRIES, '198.18.1.1', 53);
    const mine = (flows: Awaited<ReturnType<NetlinkConntrack['list']>>) =>
      flows.filter((f) => f.orig.dst === '198.18.0.2').map((f) => `${f.orig.src}:${f.orig.sport} -> ${f.orig.dst}:${f.orig.dport}`).sort();

    const before = await ct.list('IPv4', IPPROTO_UDP);
    const costBefore = ct.lastList!;
    expect(costBefore.path).toBe('kernel-filter');
    expect(mine(before)).toEqual(oracleUdp());
    expect(mine(before)).toHaveLength(UDP_ENTRIES);

    insert('tcp', TCP_ENTRIES, '198.18.1.2', 9);
    const full = await ct.list('IPv4');
    const fullCost = ct.lastList!;
    expect(fullCost.path).toBe('full-dump');
    expect(full.filter((f) => f.orig.dst === '198.18.0.2' && f.proto !== IPPROTO_UDP)).toHaveLength(TCP_ENTRIES);

    const after = await ct.list('IPv4', IPPROTO_UDP);
    const costAfter = ct.lastList!;
    expect(costAfter.path).toBe('kernel-filter');
    expect(after.every((f) => f.proto === IPPROTO_UDP)).toBe(true);
    expect(mine(after)).toEqual(oracleUdp());
    // The kernel sent exactly what it sent before the TCP entries came: same entries, same bytes.
    expect(after.map(formatFlow).sort()).toEqual(before.map(formatFlow).sort());
    expect({ messages: costAfter.messages, bytes: costAfter.bytes }).toEqual({ messages: costBefore.messages, bytes: costBefore.bytes });
    console.log(`conntrack list with ${TCP_ENTRIES} TCP entries present: UDP filter ${costAfter.messages} entries / ${costAfter.bytes} bytes ` +
      `(before them ${costBefore.messages} / ${costBefore.bytes}); full dump ${fullCost.messages} entries / ${fullCost.bytes} bytes`);
  }, 600_000);
});
