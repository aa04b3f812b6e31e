// The ipset difference (issue 29): parsing `ipset save` (incl. hostile text), the kernel's printed
// member form, and the planner, whose payloads are also applied to FakeHost to see what they do.
// The save text below is what the lab VM printed (ipset 7.17, Linux 6.1) for the members added as
// written in ADDED; test/kernel/ipset-sync.test.ts checks the same forms against the real kernel.
// Addresses: VIPs 10.200.1.0/24 + fd00:200::/64, pods 10.10.0.0/16, LB clients 198.51.100.0/24.
import { describe, expect, it } from '@jest/globals';
import type { SetEntry } from '../../../src/desired/types.js';
import { parseIpsetSave } from '../../../src/iptables/ipset-save.js';
import { planIpsets } from '../../../src/iptables/ipset-plan.js';
import { isReadOnlyRestore } from '../../../src/iptables/ipset.js';
import { desiredSets } from '../../../src/iptables/render.js';
import { dedent } from '../../support/iptables-text.js';
import { FakeHost } from '../../support/iptables-fake.js';

const VM_SAVE = dedent(`
  create T-IP hash:ip family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0xafd7b334
  add T-IP 10.0.0.1
  create T6-IPP hash:ip,port family inet6 hashsize 1024 maxelem 65536 bucketsize 12 initval 0x868e283f
  add T6-IPP fd00::1,sctp:80
  add T6-IPP fd00::1,tcp:80
  create T-IPPN hash:ip,port,net family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0xbf5f809c
  add T-IPPN 10.0.0.1,tcp:80,128.0.0.0/1
  add T-IPPN 10.0.0.1,tcp:80,192.168.1.5
  add T-IPPN 10.0.0.1,tcp:80,192.168.1.0/24
  create T-BP bitmap:port range 0-65535
  add T-BP 0
  add T-BP 30000
  create T-CNT hash:ip family inet hashsize 1024 maxelem 65536 timeout 0 counters comment bucketsize 12 initval 0xfe34970f
  add T-CNT 1.2.3.4 timeout 0 packets 0 bytes 0 comment "x y"
`);

describe('parseIpsetSave', () => {
  it('reads headers and members as the kernel printed them', () => {
    const { sets, garbage } = parseIpsetSave(VM_SAVE);
    expect(garbage).toEqual([]);
    expect(sets.get('T-IP')).toEqual({ name: 'T-IP', type: 'hash:ip', family: 'inet', maxelem: 65536, options: [], members: new Set(['10.0.0.1']) });
    expect(sets.get('T6-IPP')!.members).toEqual(new Set(['fd00::1,sctp:80', 'fd00::1,tcp:80']));
    expect([...sets.get('T-IPPN')!.members]).toEqual(['10.0.0.1,tcp:80,128.0.0.0/1', '10.0.0.1,tcp:80,192.168.1.5', '10.0.0.1,tcp:80,192.168.1.0/24']);
    expect(sets.get('T-BP')).toEqual({ name: 'T-BP', type: 'bitmap:port', range: '0-65535', options: [], members: new Set(['0', '30000']) });
    // Extensions: header options kept, the member line marks the set as not understood.
    expect(sets.get('T-CNT')).toMatchObject({ options: ['timeout', '0', 'counters', 'comment'], odd: expect.stringContaining('extensions') });
  });

  it.each([
    ['a line before any set', 'hello\ncreate A hash:ip family inet maxelem 65536\n', ['hello'], undefined],
    ['an add for a set not created in the dump', 'add B 10.0.0.1\n', ['add B 10.0.0.1'], undefined],
    ['a create without type', 'create A\n', ['create A'], undefined],
    ['a member with shell characters', 'create A hash:ip family inet maxelem 65536\nadd A 10.0.0.1;reboot\n', [], 'member not understood'],
    ['a member of 10 000 characters', `create A hash:ip family inet maxelem 65536\nadd A ${'1'.repeat(10000)}\n`, [], 'member not understood'],
    ['a set created twice', 'create A hash:ip family inet maxelem 65536\ncreate A hash:ip family inet maxelem 65536\n', [], 'created twice'],
    ['NUL bytes and an error line', 'create A hash:ip family inet maxelem 65536\n\0\0\nipset v7.17: Error\n', ['\0\0', 'ipset v7.17: Error'], undefined],
  ])('hostile text: %s -> garbage or an odd set, never a throw', (_name, text, garbage, odd) => {
    const r = parseIpsetSave(text);
    expect(r.garbage).toEqual(garbage);
    if (odd) expect(r.sets.get('A')!.odd).toContain(odd);
    else expect(r.sets.get('A')?.odd).toBeUndefined();
  });

  it('keeps at most 10 garbage lines of at most 200 characters; empty text is no set', () => {
    const r = parseIpsetSave(Array.from({ length: 50 }, () => 'x'.repeat(500)).join('\n'));
    expect(r.garbage).toHaveLength(10);
    expect(r.garbage[0]).toHaveLength(200);
    expect(parseIpsetSave('')).toEqual({ sets: new Map(), garbage: [] });
  });
});

const entry = (e: Partial<SetEntry> & Pick<SetEntry, 'set'>): SetEntry => ({ family: 'IPv4', protocol: 'TCP', port: 80, ...e });

describe('desiredSets: members in the kernel\'s printed form', () => {
  it('IPv6 compressed, host bits cleared, /32 and /128 left out, /0 as two /1 halves, protocols lower-case', () => {
    const sets = [
      entry({ set: 'KUBE-CLUSTER-IP', family: 'IPv6', address: 'fd00:200:0:0::000a', protocol: 'SCTP' }),
      entry({ set: 'KUBE-LOAD-BALANCER-SOURCE-CIDR', address: '10.200.1.1', cidr: '198.51.100.7/24' }),
      entry({ set: 'KUBE-LOAD-BALANCER-SOURCE-CIDR', address: '10.200.1.1', cidr: '198.51.100.7/32' }),
      entry({ set: 'KUBE-LOAD-BALANCER-SOURCE-CIDR', address: '10.200.1.1', cidr: '0.0.0.0/0', protocol: 'UDP' }),
      entry({ set: 'KUBE-LOAD-BALANCER-SOURCE-CIDR', family: 'IPv6', address: 'fd00:200::1', cidr: 'fd00:1:2:3::5/64' }),
      entry({ set: 'KUBE-LOAD-BALANCER-SOURCE-CIDR', family: 'IPv6', address: 'fd00:200::1', cidr: 'FD00::5/128' }),
      entry({ set: 'KUBE-LOOP-BACK', family: 'IPv6', address: 'fd00:10::0:2', source: 'fd00:10:0::2' }),
    ];
    const got = Object.fromEntries(desiredSets({ sets, vips: new Set(['fd00:200::0:1']) })
      .filter((w) => w.members.length).map((w) => [w.name, w.members]));
    expect(got).toEqual({
      'IPVSOP-LB-SRC-CIDR': ['10.200.1.1,tcp:80,198.51.100.0/24', '10.200.1.1,tcp:80,198.51.100.7', '10.200.1.1,udp:80,0.0.0.0/1',
        '10.200.1.1,udp:80,128.0.0.0/1'],
      'IPVSOP6-CLUSTER-IP': ['fd00:200::a,sctp:80'],
      'IPVSOP6-LB-SRC-CIDR': ['fd00:200::1,tcp:80,fd00:1:2:3::/64', 'fd00:200::1,tcp:80,fd00::5'],
      'IPVSOP6-LOOP-BACK': ['fd00:10::2,tcp:80,fd00:10::2'],
      'IPVSOP6-VIPS': ['fd00:200::1'],
    });
  });
});

const V4 = { families: ['IPv4'] as const };
const wanted = (vips: string[], clusterIps: string[] = []) => desiredSets({
  sets: clusterIps.map((a) => entry({ set: 'KUBE-CLUSTER-IP', address: a })), vips: new Set(vips),
}, V4).filter((w) => w.name === 'IPVSOP-VIPS' || w.name === 'IPVSOP-CLUSTER-IP' || w.name === 'IPVSOP-NP-TCP');
const HASH = (name: string, extra = '') => `create ${name} hash:ip family inet hashsize 1024 maxelem 65536${extra}`;
const IN_STEP = [HASH('IPVSOP-VIPS'), 'add IPVSOP-VIPS 10.200.1.1',
  'create IPVSOP-CLUSTER-IP hash:ip,port family inet hashsize 4096 maxelem 65536 bucketsize 12 initval 0x1',
  'add IPVSOP-CLUSTER-IP 10.200.1.1,tcp:80', 'create IPVSOP-NP-TCP bitmap:port range 0-65535'];
const NAMES = new Set(['IPVSOP-VIPS', 'IPVSOP-CLUSTER-IP', 'IPVSOP-NP-TCP']);
const plan = (save: string[], vips = ['10.200.1.1'], existing: ReadonlySet<string> = NAMES) =>
  planIpsets(wanted(vips, ['10.200.1.1']), parseIpsetSave(save.join('\n')), existing);
const swapOf = (n: string) => [`create ${n}-tmp`, `swap ${n}-tmp ${n}`, `destroy ${n}-tmp`];

describe('planIpsets', () => {
  it('in step (hashsize and initval differing): an empty payload', () => {
    expect(plan(IN_STEP)).toEqual({ payload: '', recreate: [], notes: [], dels: 0, adds: 0 });
  });

  it('dels of the extra members first, then adds of the missing ones', () => {
    const p = plan([...IN_STEP, 'add IPVSOP-VIPS 10.200.1.9'], ['10.200.1.1', '10.200.1.2', '10.200.1.3']);
    expect(p.payload).toBe('del IPVSOP-VIPS 10.200.1.9\nadd IPVSOP-VIPS 10.200.1.2\nadd IPVSOP-VIPS 10.200.1.3\n');
    expect([p.dels, p.adds]).toEqual([1, 2]);
  });

  it('creates and fills a missing set; destroys a stale -tmp', () => {
    const p = plan(IN_STEP.slice(2), ['10.200.1.1'], new Set(['IPVSOP-CLUSTER-IP', 'IPVSOP-NP-TCP', 'IPVSOP-VIPS-tmp']));
    expect(p.payload).toBe(`destroy IPVSOP-VIPS-tmp\n${HASH('IPVSOP-VIPS')}\nadd IPVSOP-VIPS 10.200.1.1\n`);
  });

  it.each([
    ['maxelem too small', [HASH('IPVSOP-VIPS').replace('65536', '1')], 'maxelem 1 < 2'],
    ['extensions in the header', [HASH('IPVSOP-VIPS', ' counters')], 'options counters'],
    ['a member not understood', [HASH('IPVSOP-VIPS'), 'add IPVSOP-VIPS 10.200.1.1$'], 'member not understood: add IPVSOP-VIPS 10.200.1.1$'],
    ['listed by name, absent from the dump', [], 'listed but not in the dump'],
  ])('refills through -tmp + swap: %s', (_name, vips, why) => {
    const p = plan([...IN_STEP.slice(2), ...vips], ['10.200.1.1', '10.200.1.2']);
    expect(p.notes).toEqual([`IPVSOP-VIPS: refilled: ${why}`]);
    for (const l of swapOf('IPVSOP-VIPS')) expect(p.payload).toContain(l);
    expect(p.payload).toContain('add IPVSOP-VIPS-tmp 10.200.1.2\n');
    expect(p.recreate).toEqual([]);
  });

  it('refills a bitmap whose range is not 0-65535', () => {
    const p = plan([...IN_STEP.slice(0, 4), 'create IPVSOP-NP-TCP bitmap:port range 30000-32767']);
    expect(p.notes).toEqual(['IPVSOP-NP-TCP: refilled: range 30000-32767']);
  });

  it.each([
    ['another type', 'create IPVSOP-VIPS hash:net family inet hashsize 1024 maxelem 65536', 'type hash:net, not hash:ip'],
    ['another family', 'create IPVSOP-VIPS hash:ip family inet6 hashsize 1024 maxelem 65536', 'family inet6, not inet'],
    ['an unknown type', 'create IPVSOP-VIPS hash:bogus whatever', 'type hash:bogus, not hash:ip'],
  ])('destroys and creates a set of %s (swap refuses it), and says so', (_name, create, why) => {
    const p = plan([...IN_STEP.slice(2), create]);
    expect(p.recreate).toEqual(['IPVSOP-VIPS']);
    expect(p.notes).toEqual([`IPVSOP-VIPS: recreated: ${why}`]);
    expect(p.payload).toBe(`destroy IPVSOP-VIPS\n${HASH('IPVSOP-VIPS')}\nadd IPVSOP-VIPS 10.200.1.1\n`);
  });

  it('garbage in the dump: every existing set refilled whole, as before the difference', () => {
    const p = plan(['garbage', ...IN_STEP]);
    expect(p.notes.map((n) => n.split(':')[0])).toEqual(['IPVSOP-CLUSTER-IP', 'IPVSOP-NP-TCP', 'IPVSOP-VIPS']);
    expect(p.notes[0]).toContain('lines not understood: garbage');
  });

  it('applied to FakeHost, any start leaves exactly the desired members (seeded from random states)', async () => {
    let seed = 7;
    // The high bits: an LCG's low bits repeat with a short period.
    const rnd = (n: number) => { seed = (Math.imul(seed, 1103515245) + 12345) >>> 0; return (seed >>> 16) % n; };
    let refilled = 0;
    let inPlace = 0;
    for (let round = 0; round < 30; round++) {
      const host = new FakeHost();
      const pick = () => Array.from({ length: rnd(6) }, () => `10.200.1.${rnd(8)}`);
      const start = wanted(pick(), pick());
      const setup = start.flatMap((w) => [`create ${w.name} ${w.spec.type === 'bitmap:port' ? 'bitmap:port range 0-65535'
        : `${w.spec.type} family inet maxelem ${Math.max(1, w.members.length + rnd(3))}`}`, ...w.members.map((m) => `add ${w.name} ${m}`)]);
      expect((await host.run('ipset', ['restore', '-exist'], `${setup.join('\n')}\n`)).stderr).toBe('');
      const goal = wanted(pick(), pick());
      const names = new Set(host.sets.keys());
      const p = planIpsets(goal, parseIpsetSave((await host.run('ipset', ['save'])).stdout), names);
      refilled += p.notes.length;
      inPlace += p.dels + p.adds;
      const r = await host.run('ipset', ['restore', '-exist'], p.payload);
      expect(r.stderr).toBe('');
      for (const w of goal) expect([...host.sets.get(w.name)!.members].sort()).toEqual([...w.members].sort());
      // And then it is in step.
      expect(planIpsets(goal, parseIpsetSave((await host.run('ipset', ['save'])).stdout), names).payload).toBe('');
    }
    // Both ways were taken: sets too small for the goal refilled, the others changed in place.
    expect(refilled).toBeGreaterThan(0);
    expect(inPlace).toBeGreaterThan(0);
  });
});

describe('isReadOnlyRestore (the dry run runs these)', () => {
  it('only save/list lines read', () => {
    expect(isReadOnlyRestore('save IPVSOP-VIPS\nsave IPVSOP-LB\n')).toBe(true);
    expect(isReadOnlyRestore('save IPVSOP-VIPS\nadd IPVSOP-VIPS 10.200.1.1\n')).toBe(false);
    expect(isReadOnlyRestore('')).toBe(false);
  });
});
