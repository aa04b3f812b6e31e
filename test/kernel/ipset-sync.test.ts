// The iptables path's ipsets synced by difference (issue 29) against the real ipset/kernel in the
// lab VM: `ipset list` is the oracle, a recording runner shows what IptablesRestore sent. Prefix
// IPSK (its own sets and chains, removed before and after). Addresses: ClusterIPs 10.200.7.0/24
// and fd00:200:7::/64, pods 10.10.7.0/24, LB clients 198.51.100.0/24 and 2001:db8:7::/64.
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { PluginRegistry } from '../../plugins/index.js';
import { buildDesired } from '../../src/desired/state.js';
import type { Desired, SetEntry } from '../../src/desired/types.js';
import { type ProxyConfig, defaultProxyConfig } from '../../src/config/types.js';
import type { Runner } from '../../src/iptables/exec.js';
import { IptablesRestore, spawnRunner } from '../../src/iptables/restore.js';
import { desiredSets } from '../../src/iptables/render.js';
import { NetlinkSetReader, toolSetReader } from '../../src/iptables/ipset-reader.js';
import type { SavedSet } from '../../src/iptables/ipset-save.js';
import { type IpPortMember, IpsetError } from '../../src/iptables/ipset-netlink.js';
import { NetlinkSetMembers } from '../../src/iptables/syn-hold.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');
jest.setTimeout(240_000);

const PREFIX = 'IPSK';
const config: ProxyConfig = { ...defaultProxyConfig, clusterCIDRs: ['10.10.0.0/16'] };
const node: V1Node = { metadata: { name: 'node-a' }, status: { addresses: [{ type: 'InternalIP', address: '192.168.100.1' }] } };
const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

function service(name: string, ip: string, protocol: string, nodePort: number): V1Service {
  return {
    metadata: { namespace: 'lab', name, resourceVersion: '1' },
    spec: { type: 'NodePort', clusterIP: ip, clusterIPs: [ip], selector: { app: name }, ports: [{ port: 80, protocol, nodePort }] },
  };
}
/** Entries for the types and forms buildDesired alone does not reach here: IPv6, source nets with host bits, /32, /0. */
const e = (x: Partial<SetEntry> & Pick<SetEntry, 'set'>): SetEntry => ({ family: 'IPv4', protocol: 'TCP', port: 80, ...x });
const EXTRA: SetEntry[] = [
  e({ set: 'KUBE-LOAD-BALANCER-SOURCE-CIDR', address: '10.200.7.100', cidr: '198.51.100.7/24' }),
  e({ set: 'KUBE-LOAD-BALANCER-SOURCE-CIDR', address: '10.200.7.100', cidr: '198.51.100.9/32', protocol: 'SCTP' }),
  e({ set: 'KUBE-LOAD-BALANCER-SOURCE-CIDR', address: '10.200.7.101', cidr: '0.0.0.0/0', protocol: 'UDP' }),
  e({ set: 'KUBE-LOAD-BALANCER-SOURCE-IP', address: '10.200.7.100', source: '10.200.7.100' }),
  e({ set: 'KUBE-LOOP-BACK', address: '10.10.7.2', port: 8080, source: '10.10.7.2' }),
  e({ set: 'KUBE-CLUSTER-IP', family: 'IPv6', address: 'fd00:200:7:0::000a', protocol: 'SCTP' }),
  e({ set: 'KUBE-CLUSTER-IP', family: 'IPv6', address: 'fd00:200:7::b', protocol: 'UDP' }),
  e({ set: 'KUBE-LOAD-BALANCER-SOURCE-CIDR', family: 'IPv6', address: 'fd00:200:7::a', cidr: '2001:db8:7::5/64' }),
  e({ set: 'KUBE-LOAD-BALANCER-SOURCE-CIDR', family: 'IPv6', address: 'fd00:200:7::a', cidr: '2001:DB8:7::9/128' }),
  e({ set: 'KUBE-LOAD-BALANCER-SOURCE-CIDR', family: 'IPv6', address: 'fd00:200:7::a', cidr: '::/0' }),
  e({ set: 'KUBE-LOOP-BACK', family: 'IPv6', address: 'fd00:10:7::2', port: 8080, source: 'fd00:10:7:0::2' }),
  e({ set: 'KUBE-NODE-PORT-LOCAL-SCTP-HASH', family: 'IPv6', address: 'fd00:192::10', port: 30099, protocol: 'SCTP' }),
];
const BASE = [service('a', '10.200.7.10', 'TCP', 30070), service('b', '10.200.7.11', 'UDP', 30071), service('c', '10.200.7.12', 'SCTP', 30072)];

function desired(services: V1Service[], vips: string[] = []): Desired {
  const d = buildDesired({ services, endpointSlices: [], node, nodeName: 'node-a' }, config, new PluginRegistry());
  return { ...d, sets: [...d.sets, ...EXTRA], vips: new Set([...d.vips, ...vips]) };
}
const D1 = desired(BASE, ['fd00:200:7:0:0::a']);

/** Members of a set as `ipset list` shows them (the oracle: another command than the save we parse). */
const listed = (name: string) => sh('ipset', 'list', name).split('\n').slice(1).join('\n').split('Members:\n')[1]!
  .split('\n').filter(Boolean).sort();
const header = (name: string) => /^Header: (.*)$/m.exec(sh('ipset', 'list', '-t', name))?.[1] ?? '';
/** Our sets' save text (set order as the kernel keeps it). */
const ourSave = () => sh('ipset', 'save').split('\n').filter((l) => / IPSK6?-/.test(` ${l}`)).join('\n');

/** A runner that records every call, then runs it for real. */
function recording(): { run: Runner; calls: { cmd: string; args: string[]; input?: string }[] } {
  const calls: { cmd: string; args: string[]; input?: string }[] = [];
  return { calls, run: (cmd, args, input) => { calls.push({ cmd, args: [...args], ...(input === undefined ? {} : { input }) }); return spawnRunner(cmd, args, input); } };
}
const ipsetWrites = (calls: { cmd: string; args: string[]; input?: string }[]) =>
  calls.filter((c) => c.cmd === 'ipset' && c.args.join(' ') === 'restore -exist').map((c) => c.input);

const clean = () => new IptablesRestore({ prefix: PREFIX }).cleanup();
beforeAll(async () => {
  await clean();
  // Foreign sets: one named like kube-proxy's, one with our prefix but not a name we own.
  sh('ipset', 'create', 'KUBE-CLUSTER-IP', 'hash:ip,port', '-exist');
  sh('ipset', 'add', 'KUBE-CLUSTER-IP', '10.96.0.1,tcp:443', '-exist');
  sh('ipset', 'create', 'IPSK-FOREIGN', 'hash:ip', '-exist');
  sh('ipset', 'add', 'IPSK-FOREIGN', '10.99.0.1', '-exist');
});
afterAll(async () => {
  await clean();
  sh('ipset', 'destroy', 'KUBE-CLUSTER-IP');
  sh('ipset', 'destroy', 'IPSK-FOREIGN');
});

describe('ipsets synced by difference, in the lab VM', () => {
  const foreign = () => sh('ipset', 'save', 'KUBE-CLUSTER-IP') + sh('ipset', 'save', 'IPSK-FOREIGN');
  let foreignBefore = '';

  it('programs every set type in both families; the kernel prints exactly the members rendered', async () => {
    foreignBefore = foreign();
    await new IptablesRestore({ prefix: PREFIX }).sync(D1, config);
    const wanted = desiredSets(D1, { prefix: PREFIX });
    expect(wanted.filter((w) => w.members.length).length).toBeGreaterThanOrEqual(12);
    for (const w of wanted) expect([w.name, listed(w.name)]).toEqual([w.name, [...w.members].sort()]);
  });

  it('a restart over the in-step host reads our sets once and writes no ipset line', async () => {
    const before = ourSave();
    const rec = recording();
    const restarted = new IptablesRestore({ prefix: PREFIX, run: rec.run });
    await restarted.sync(D1, config);
    const ipsetCalls = rec.calls.filter((c) => c.cmd === 'ipset').map((c) => c.args.join(' '));
    expect(ipsetCalls).toEqual(['list -n', 'restore']);
    expect(ipsetWrites(rec.calls)).toEqual([]);
    expect(restarted.last!.ipset).toBe('');
    expect(ourSave()).toBe(before);
  });

  it('a restart reading our sets over netlink runs no ipset tool and writes nothing', async () => {
    const before = ourSave();
    const rec = recording();
    const reader = new NetlinkSetReader();
    try {
      const restarted = new IptablesRestore({ prefix: PREFIX, run: rec.run, sets: reader });
      await restarted.sync(D1, config);
      expect(rec.calls.filter((c) => c.cmd === 'ipset')).toEqual([]);
      expect(restarted.last!.ipset).toBe('');
      expect(ourSave()).toBe(before);
    } finally {
      reader.close();
    }
  });

  it('the netlink reader reads every set as ipset save prints it, and counts as ipset list -t, foreign and odd ones too', async () => {
    // Sets the planner must not change in place: options, a nomatch member, another protocol,
    // another type, a netmask, another range; and kube-proxy's, and ours as the sync left them.
    const odd: string[][] = [
      ['IPSKX-TIMEOUT', 'hash:ip', 'timeout', '600'], ['IPSKX-COUNTERS', 'hash:ip,port', 'counters', 'comment'],
      ['IPSKX-NOMATCH', 'hash:ip,port,net'], ['IPSKX-ICMP', 'hash:ip,port'], ['IPSKX-NET', 'hash:net'],
      ['IPSKX-MASK', 'hash:ip', 'netmask', '24'], ['IPSKX-RANGE', 'bitmap:port', 'range', '1000-2000'],
    ];
    for (const [name, ...args] of odd) sh('ipset', 'create', name!, ...args, '-exist');
    sh('ipset', 'add', 'IPSKX-TIMEOUT', '10.0.0.1', 'timeout', '300', '-exist');
    sh('ipset', 'add', 'IPSKX-COUNTERS', '10.0.0.1,tcp:80', 'comment', 'x', '-exist');
    sh('ipset', 'add', 'IPSKX-NOMATCH', '10.0.0.1,tcp:80,10.1.0.0/16', 'nomatch', '-exist');
    sh('ipset', 'add', 'IPSKX-NOMATCH', '10.0.0.1,udp:53,10.2.0.0/16', '-exist');
    sh('ipset', 'add', 'IPSKX-ICMP', '10.0.0.1,icmp:echo-request', '-exist');
    sh('ipset', 'add', 'IPSKX-NET', '10.3.0.0/16', '-exist');
    sh('ipset', 'add', 'IPSKX-MASK', '10.4.5.6', '-exist');
    sh('ipset', 'add', 'IPSKX-RANGE', '1500', '-exist');
    const reader = new NetlinkSetReader();
    try {
      const tool = toolSetReader(spawnRunner);
      const names = await reader.names();
      expect([...names].sort()).toEqual([...await tool.names()].sort());
      // The periodic check's read: members per set from the headers, as `ipset list -t` counts them.
      const counts = await reader.counts();
      expect([...counts].sort()).toEqual([...await tool.counts()].sort());
      expect(counts.get('IPSKX-NOMATCH')).toBe(2);
      const all = [...names].filter((n) => n.startsWith('IPSK') || n === 'KUBE-CLUSTER-IP');
      expect(all.length).toBeGreaterThanOrEqual(12 + odd.length);
      const [ours, theirs] = [await reader.read(all), await tool.read(all)];
      expect(theirs.garbage).toEqual([]);
      /** What the planner reads of a set: it is changed in place only when neither odd nor optioned. */
      const view = (x: SavedSet | undefined) => x && {
        name: x.name, type: x.type, family: x.family, maxelem: x.maxelem, range: x.range,
        inPlace: !x.odd && !x.options.length, ...(!x.odd && !x.options.length ? { members: [...x.members].sort() } : {}),
      };
      const isOdd = (n: string) => n.startsWith('IPSKX-');
      for (const n of all.filter((x) => !isOdd(x))) expect(view(ours.sets.get(n))).toEqual(view(theirs.sets.get(n)));
      // The odd ones: header fields alike (the planner refills the other range by its header); no other
      // is changed in place by ours. ipset's text of an icmp member (icmp:echo-request) and of a
      // hash:net member passes the save's parse; ours marks what it cannot print, so it is refilled.
      for (const [name, type] of odd) {
        const [o, t] = [view(ours.sets.get(name!))!, view(theirs.sets.get(name!))!];
        expect({ ...o, inPlace: false, members: undefined }).toEqual({ ...t, inPlace: false, members: undefined });
        const range = name === 'IPSKX-RANGE';
        expect([name, type, o.inPlace, t.inPlace]).toEqual([name, type, range, range || name === 'IPSKX-ICMP' || name === 'IPSKX-NET']);
      }
      await expect(reader.read(['IPSKX-GONE'])).rejects.toMatchObject({ code: 'ENOENT' });
    } finally {
      reader.close();
      for (const [name] of odd) sh('ipset', 'destroy', name!);
    }
  });

  it('a NodePort moved and a Service added: only their lines are sent, ipset list shows the result', async () => {
    const rec = recording();
    const ipt = new IptablesRestore({ prefix: PREFIX, run: rec.run });
    const moved = [service('a', '10.200.7.10', 'TCP', 30075), ...BASE.slice(1), service('d', '10.200.7.13', 'TCP', 30076)];
    await ipt.sync(desired(moved, ['fd00:200:7::a']), config);
    expect(ipsetWrites(rec.calls)).toEqual([[
      'add IPSK-CLUSTER-IP 10.200.7.13,tcp:80', 'del IPSK-NP-TCP 30070', 'add IPSK-NP-TCP 30075', 'add IPSK-NP-TCP 30076',
      'add IPSK-VIPS 10.200.7.13', '',
    ].join('\n')]);
    expect(listed('IPSK-NP-TCP')).toEqual(['30075', '30076']);
    expect(listed('IPSK-CLUSTER-IP')).toEqual(['10.200.7.10,tcp:80', '10.200.7.11,udp:80', '10.200.7.12,sctp:80', '10.200.7.13,tcp:80']);
    expect(foreign()).toBe(foreignBefore);
  });

  it('rebuilds a set of ours with too small a maxelem, and one of another type that our rules name', async () => {
    await clean();
    sh('ipset', 'create', 'IPSK-VIPS', 'hash:ip', 'maxelem', '1');
    sh('ipset', 'add', 'IPSK-VIPS', '10.200.7.99');
    sh('ipset', 'create', 'IPSK-NP-TCP', 'hash:ip,port');
    sh('ipset', 'create', 'IPSK-LB-tmp', 'hash:ip,port');
    // As a former version might have left it: our chain naming the wrong-typed set.
    sh('iptables', '-t', 'nat', '-N', 'IPSK-NODE-PORT');
    sh('iptables', '-t', 'nat', '-A', 'IPSK-NODE-PORT', '-m', 'set', '--match-set', 'IPSK-NP-TCP', 'dst,dst', '-j', 'RETURN');
    const ipt = new IptablesRestore({ prefix: PREFIX });
    await ipt.sync(D1, config);
    expect(ipt.last!.ipsetNotes).toEqual([
      'IPSK-NP-TCP: recreated: type hash:ip,port, not bitmap:port', `IPSK-VIPS: refilled: maxelem 1 < ${listed('IPSK-VIPS').length}`]);
    expect(header('IPSK-VIPS')).toContain('maxelem 65536');
    expect(listed('IPSK-VIPS')).toEqual(['10.200.7.10', '10.200.7.11', '10.200.7.12']);
    expect(sh('ipset', 'list', '-t', 'IPSK-NP-TCP')).toMatch(/^Type: bitmap:port$/m);
    expect(listed('IPSK-NP-TCP')).toEqual(['30070']);
    expect(sh('ipset', 'list', '-n').split('\n')).not.toContain('IPSK-LB-tmp');
    expect(sh('iptables-save', '-t', 'nat')).toContain('-A IPSK-NODE-PORT -p tcp -m set --match-set IPSK-NP-TCP dst -j IPSK-MARK-MASQ');
    expect(foreign()).toBe(foreignBefore);
  });

  it('the SYN hold: members added over netlink while the swap runs, both families, deleted after; twice is no error', async () => {
    const ipt = new IptablesRestore({ prefix: PREFIX });
    await ipt.sync(D1, config);
    const members: IpPortMember[] = [
      { family: 'IPv4', address: '10.200.7.10', protocol: 'tcp', port: 80 },
      { family: 'IPv6', address: 'fd00:200:7::a', protocol: 'tcp', port: 443 },
    ];
    const during = await ipt.holdSyns(members, async () => [listed('IPSK-HOLD'), listed('IPSK6-HOLD')]);
    expect(during).toEqual({ value: [['10.200.7.10,tcp:80'], ['fd00:200:7::a,tcp:443']] });
    expect([listed('IPSK-HOLD'), listed('IPSK6-HOLD')]).toEqual([[], []]);
    // As `ipset -exist`: a member added twice, or deleted when gone, is no error.
    const w = new NetlinkSetMembers();
    const set = (m: IpPortMember) => (m.family === 'IPv4' ? 'IPSK-HOLD' : 'IPSK6-HOLD');
    await w.add(set, members);
    await w.add(set, members);
    expect([listed('IPSK-HOLD'), listed('IPSK6-HOLD')]).toEqual([['10.200.7.10,tcp:80'], ['fd00:200:7::a,tcp:443']]);
    await w.del(set, members);
    await w.del(set, members);
    expect([listed('IPSK-HOLD'), listed('IPSK6-HOLD')]).toEqual([[], []]);
    // No such set: the kernel's refusal names the member; a hold that cannot be set lets the swap run.
    await expect(w.add(() => 'IPSK-NO-SUCH', members.slice(0, 1))).rejects.toThrow(IpsetError);
    const unheld = await new IptablesRestore({ prefix: 'IPSKX' }).holdSyns(members, async () => 'swapped');
    expect({ value: unheld.value, error: unheld.error instanceof IpsetError, text: String(unheld.error) })
      .toMatchObject({ value: 'swapped', error: true, text: expect.stringContaining('IPSKX-HOLD 10.200.7.10,tcp:80') });
    w.close();
  });
});
