// IptablesRestore against FakeHost (test/support/iptables-fake.ts): what ends up on the "host"
// after sync and cleanup, the ownership rules, backend detection and failures. No real iptables.
import { describe, expect, it } from '@jest/globals';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Service } from '@kubernetes/client-node';
import { PluginRegistry } from '../../../plugins/index.js';
import { buildDesired } from '../../../src/desired/state.js';
import { type Desired } from '../../../src/desired/types.js';
import { type ProxyConfig, defaultProxyConfig } from '../../../src/config/types.js';
import { chooseMode, parseVersion, versionAtLeast } from '../../../src/iptables/backend.js';
import { isIptablesError, withDeadline } from '../../../src/iptables/exec.js';
import { IptablesRestore, spawnRunner } from '../../../src/iptables/restore.js';
import { wantedCounts } from '../../../src/iptables/drift.js';
import { renderIpsets } from '../../../src/iptables/render.js';
import type { IptablesSync } from '../../../src/iptables/sync.js';
import { FakeHost } from '../../support/iptables-fake.js';
import { NODE, makeNode, makeService } from '../../support/fixtures.js';

const _: IptablesSync = new IptablesRestore({ run: new FakeHost().run });
const config: ProxyConfig = { ...defaultProxyConfig, clusterCIDRs: ['10.10.0.0/16'] };
const registry = new PluginRegistry();

function desired(...services: V1Service[]): Desired {
  return buildDesired({ services, endpointSlices: [], node: makeNode(), nodeName: NODE }, config, registry);
}
const np = (name: string, ip: string, port: number) => makeService('ns', name, (s) => {
  s.spec!.type = 'NodePort'; s.spec!.ports![0]!.nodePort = port; s.spec!.clusterIP = ip; s.spec!.clusterIPs = [ip];
});

/** A host with someone else's chain, rules and set in place. */
function foreignHost(): FakeHost {
  const host = new FakeHost();
  host.run('ipset', ['restore'], 'create FOREIGN-SET hash:ip family inet\nadd FOREIGN-SET 10.1.2.3\n');
  host.seed('nft', 'v4', '*filter\n:FOREIGN - [0:0]\n-A INPUT -j FOREIGN\n-A FOREIGN -m set --match-set FOREIGN-SET src -j DROP\nCOMMIT\n'
    + '*nat\n-A POSTROUTING -s 10.99.0.0/16 -j MASQUERADE\nCOMMIT\n');
  host.calls.length = 0;
  return host;
}
const foreignLines = ['-A INPUT -j FOREIGN', '-A FOREIGN -m set --match-set FOREIGN-SET src -j DROP', '-A POSTROUTING -s 10.99.0.0/16 -j MASQUERADE'];

describe('IptablesRestore.sync', () => {
  it('creates our sets and chains, hooks them once, keeps foreign chains, rules and sets', async () => {
    const host = foreignHost();
    const ipt = new IptablesRestore({ run: host.run });
    await ipt.sync(desired(np('a', '10.200.1.10', 30080)), config);
    const v4 = host.save('nft', 'v4');
    for (const l of foreignLines) expect(v4).toContain(`${l}\n`);
    expect(v4).toContain('-A PREROUTING -m comment --comment "ipvs-operator service portals" -j IPVSOP-SERVICES\n');
    expect(v4).toContain('-A INPUT -m comment --comment "ipvs-operator VIP filter and source ranges" -j IPVSOP-INPUT\n-A INPUT -j FOREIGN\n');
    expect(host.save('nft', 'v6')).toContain(':IPVSOP-SERVICES - [0:0]');
    expect([...host.sets.get('IPVSOP-NP-TCP')!.members]).toEqual(['30080']);
    expect([...host.sets.get('IPVSOP-CLUSTER-IP')!.members]).toEqual(['10.200.1.10,tcp:80']);
    expect([...host.sets.get('FOREIGN-SET')!.members]).toEqual(['10.1.2.3']);
    expect([...host.sets.keys()].filter((n) => n.endsWith('-tmp'))).toEqual([]);
    expect(host.commands()).toEqual([
      'iptables-nft', 'iptables-legacy', 'iptables-nft-save', 'iptables-legacy-save', 'iptables-legacy-save', 'ip6tables-legacy-save',
      'iptables-nft-save', 'ip6tables-nft-save',
      'ipset', 'iptables-nft-save', 'ip6tables-nft-save', 'ipset', 'iptables-nft-restore', 'ip6tables-nft-restore',
    ]);
    expect(host.calls.find((c) => c.cmd === 'iptables-nft-restore')!.args).toEqual(['--noflush', '--wait=5']);
  });

  it('is idempotent: a second sync changes nothing and adds no second jump', async () => {
    const host = foreignHost();
    const ipt = new IptablesRestore({ run: host.run });
    const d = desired(np('a', '10.200.1.10', 30080));
    await ipt.sync(d, config);
    const before = [host.save('nft', 'v4'), host.save('nft', 'v6'), JSON.stringify([...host.sets].map(([k, v]) => [k, v.type, [...v.members]]))];
    await ipt.sync(d, config);
    expect([host.save('nft', 'v4'), host.save('nft', 'v6'), JSON.stringify([...host.sets].map(([k, v]) => [k, v.type, [...v.members]]))]).toEqual(before);
    expect(ipt.last!.v4).not.toContain('-I ');
  });

  it('changes set contents by difference (dels first), and the rules stay the same for 1 or 500 Services', async () => {
    const host = new FakeHost();
    const ipt = new IptablesRestore({ run: host.run });
    await ipt.sync(desired(np('a', '10.200.1.10', 30080)), config);
    const rules1 = host.save('nft', 'v4');
    await ipt.sync(desired(...Array.from({ length: 500 }, (_, i) => np(`s${i}`, `10.200.${i >> 8}.${i & 0xff}`, 31000 + i))), config);
    expect(host.save('nft', 'v4')).toBe(rules1);
    expect(host.sets.get('IPVSOP-NP-TCP')!.members.size).toBe(500);
    expect(host.sets.get('IPVSOP-NP-TCP')!.members.has('30080')).toBe(false);
    const lines = ipt.last!.ipset.split('\n');
    // 10.200.1.10:80 is one of the 500 (s266): it stays; the NodePort 30080 goes.
    expect(lines.filter((l) => l.startsWith('del '))).toEqual(['del IPVSOP-NP-TCP 30080']);
    expect(lines.filter((l) => l.startsWith('add IPVSOP-NP-TCP '))).toHaveLength(500);
    expect(lines.indexOf('del IPVSOP-NP-TCP 30080')).toBeLessThan(lines.indexOf('add IPVSOP-NP-TCP 31000'));
    expect(ipt.last!.ipset).not.toMatch(/^(swap|create|destroy) /m);
  });

  it('a restart over an in-step host reads the sets and writes none; one more Service sends its lines only', async () => {
    const host = foreignHost();
    const d = desired(np('a', '10.200.1.10', 30080), np('b', '10.200.1.11', 30081));
    await new IptablesRestore({ run: host.run }).sync(d, config);
    const sets = () => JSON.stringify([...host.sets].map(([k, v]) => [k, v.type, v.header, [...v.members]]));
    const before = sets();
    host.calls.length = 0;
    const restarted = new IptablesRestore({ run: host.run });
    await restarted.sync(d, config);
    expect(sets()).toBe(before);
    expect(host.calls.filter((c) => c.cmd === 'ipset').map((c) => c.args.join(' '))).toEqual(['list -n', 'restore']);
    // The one `ipset restore` read our 34 sets (save lines) and only those.
    const read = host.calls.find((c) => c.cmd === 'ipset' && c.args[0] === 'restore')!.input!;
    expect(read.split('\n').filter(Boolean)).toHaveLength(34);
    expect(read).not.toContain('FOREIGN');
    expect(restarted.last!.ipset).toBe('');
    await restarted.sync(desired(np('a', '10.200.1.10', 30080), np('b', '10.200.1.11', 30081), np('c', '10.200.1.12', 30082)), config);
    expect(restarted.last!.ipset).toBe('add IPVSOP-CLUSTER-IP 10.200.1.12,tcp:80\nadd IPVSOP-NP-TCP 30082\nadd IPVSOP-VIPS 10.200.1.12\n');
    expect([...host.sets.get('IPVSOP-NP-TCP')!.members].sort()).toEqual(['30080', '30081', '30082']);
  });

  it('after a successful sync plans against what it left, without reading; a failure reads again', async () => {
    const host = new FakeHost();
    let failRules = false;
    const ipt = new IptablesRestore({ run: async (cmd, args, input) => {
      if (failRules && cmd.includes('iptables') && cmd.endsWith('-restore')) throw new Error('iptables-restore: lock held');
      return host.run(cmd, args, input);
    } });
    const two = desired(np('a', '10.200.1.10', 30080), np('b', '10.200.1.11', 30081));
    await ipt.sync(desired(np('a', '10.200.1.10', 30080)), config);
    host.calls.length = 0;
    await ipt.sync(two, config);
    const ipsetCalls = () => host.calls.filter((c) => c.cmd === 'ipset');
    // No `list -n`, no read: one restore, the difference alone.
    expect(ipsetCalls().map((c) => [c.args.join(' '), c.input])).toEqual([
      ['restore -exist', 'add IPVSOP-CLUSTER-IP 10.200.1.11,tcp:80\nadd IPVSOP-NP-TCP 30081\nadd IPVSOP-VIPS 10.200.1.11\n']]);
    // A member taken behind its back: in step by what it remembers, nothing runs, and the member
    // stays gone until the drift check, a failed sync or a restart has the sets read again.
    await host.run('ipset', ['restore'], 'del IPVSOP-NP-TCP 30080\n');
    host.calls.length = 0;
    await ipt.sync(two, config);
    expect(ipsetCalls()).toHaveLength(0);
    expect(host.sets.get('IPVSOP-NP-TCP')!.members.has('30080')).toBe(false);
    failRules = true;
    await expect(ipt.sync(two, config)).rejects.toThrow(/lock held/);
    failRules = false;
    host.calls.length = 0;
    await ipt.sync(two, config);
    expect(ipsetCalls().map((c) => c.args.join(' '))).toEqual(['list -n', 'restore', 'restore -exist']);
    expect(host.sets.get('IPVSOP-NP-TCP')!.members.has('30080')).toBe(true);
  });

  it('refills a set of ours whose maxelem is too small through -tmp + swap', async () => {
    const host = new FakeHost();
    await host.run('ipset', ['restore'], 'create IPVSOP-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 1\n');
    const ipt = new IptablesRestore({ run: host.run });
    await ipt.sync(desired(np('a', '10.200.1.10', 30080), np('b', '10.200.1.11', 30081)), config);
    expect(ipt.last!.ipset).toMatch(/^swap IPVSOP-CLUSTER-IP-tmp IPVSOP-CLUSTER-IP$/m);
    expect(ipt.last!.ipsetNotes).toEqual(['IPVSOP-CLUSTER-IP: refilled: maxelem 1 < 2']);
    expect(host.sets.get('IPVSOP-CLUSTER-IP')!.header).toContain('maxelem 65536');
    expect(host.sets.get('IPVSOP-CLUSTER-IP')!.members.size).toBe(2);
  });

  it('recreates a set of ours of another type, our rules naming it flushed first', async () => {
    const host = new FakeHost();
    const ipt = new IptablesRestore({ run: host.run });
    const d = desired(np('a', '10.200.1.10', 30080));
    await ipt.sync(d, config);
    // As an older version might have left it: same name, another type, and our rules name it.
    host.sets.set('IPVSOP-VIPS', { ...host.sets.get('IPVSOP-CLUSTER-IP')!, members: new Set() });
    // The periodic check sees it (the sync after a successful one plans against what that left).
    expect(await ipt.drift(d, config)).toMatch(/IPVSOP-VIPS has 0 members/);
    host.calls.length = 0;
    await ipt.sync(d, config);
    expect(host.sets.get('IPVSOP-VIPS')!.type).toBe('hash:ip');
    expect([...host.sets.get('IPVSOP-VIPS')!.members]).toEqual([...d.vips].filter((v) => !v.includes(':')));
    expect(ipt.last!.ipsetNotes).toEqual(['IPVSOP-VIPS: recreated: type hash:ip,port, not hash:ip']);
    // The saves of the hook jumps run beside the set step; within it, the flush goes first.
    expect(host.commands().filter((c) => !c.endsWith('-save')).slice(0, 4))
      .toEqual(['ipset', 'ipset', 'iptables-nft-restore', 'ip6tables-nft-restore']);
    expect(host.save('nft', 'v4')).toContain('--match-set IPVSOP-VIPS dst -j REJECT');
  });

  it('re-inserts a hook jump someone deleted, and recovers a stale -tmp set', async () => {
    const host = new FakeHost();
    const ipt = new IptablesRestore({ run: host.run });
    await ipt.sync(desired(), config);
    host.seed('nft', 'v4', '*nat\n-D OUTPUT -m comment --comment "ipvs-operator service portals" -j IPVSOP-SERVICES\nCOMMIT\n');
    await host.run('ipset', ['restore'], 'create IPVSOP-VIPS-tmp hash:ip family inet\n');
    expect(await ipt.drift(desired(), config)).toMatch(/jump .* is missing/);
    await ipt.sync(desired(), config);
    expect(host.save('nft', 'v4')).toContain('-A OUTPUT -m comment --comment "ipvs-operator service portals" -j IPVSOP-SERVICES\n');
    expect(host.sets.has('IPVSOP-VIPS-tmp')).toBe(false);
  });

  it('ipv6: false leaves ip6tables alone and creates only IPv4 sets', async () => {
    const host = new FakeHost();
    await new IptablesRestore({ run: host.run, ipv6: false }).sync(desired(), config);
    expect(host.commands().filter((c) => c.startsWith('ip6tables') && !c.endsWith('-save'))).toEqual([]);
    expect([...host.sets.keys()].some((n) => n.startsWith('IPVSOP6-'))).toBe(false);
  });

  it('a failing restore rejects with an IptablesError carrying the tool\'s words', async () => {
    const host = new FakeHost();
    const ipt = new IptablesRestore({ run: host.run });
    // Our set of the wrong type, named by a foreign rule: it cannot be destroyed and made again.
    await host.run('ipset', ['restore'], 'create IPVSOP-VIPS hash:ip,port family inet\n');
    host.seed('nft', 'v4', '*filter\n:FOREIGN - [0:0]\n-A FOREIGN -m set --match-set IPVSOP-VIPS dst -j DROP\nCOMMIT\n');
    const e = await ipt.sync(desired(), config).then(() => undefined, (x: unknown) => x);
    expect(isIptablesError(e)).toBe(true);
    expect((e as Error).message).toContain('in use by a kernel component');
  });
});

describe('IptablesRestore.cleanup', () => {
  it('removes our jumps, chains and sets in both families; foreign ones survive; twice is fine', async () => {
    const host = foreignHost();
    const ipt = new IptablesRestore({ run: host.run });
    await ipt.sync(desired(np('a', '10.200.1.10', 30080)), config);
    await ipt.cleanup();
    await ipt.cleanup();
    const v4 = host.save('nft', 'v4');
    expect(v4).not.toContain('IPVSOP');
    expect(host.save('nft', 'v6')).not.toContain('IPVSOP');
    for (const l of foreignLines) expect(v4).toContain(`${l}\n`);
    expect([...host.sets.keys()]).toEqual(['FOREIGN-SET']);
  });
});

describe('backend detection', () => {
  it('follows kube-proxy\'s wrapper: hints first, then where the rules are', () => {
    expect(chooseMode({ hintNft: true, hintLegacy: true, legacyRules: 50, nftRules: 0 })).toBe('nft');
    expect(chooseMode({ hintNft: false, hintLegacy: true, legacyRules: 0, nftRules: 50 })).toBe('legacy');
    expect(chooseMode({ hintNft: false, hintLegacy: false, legacyRules: 10, nftRules: 50 })).toBe('legacy');
    expect(chooseMode({ hintNft: false, hintLegacy: false, legacyRules: 3, nftRules: 2 })).toBe('legacy');
    expect(chooseMode({ hintNft: false, hintLegacy: false, legacyRules: 0, nftRules: 0 })).toBe('nft');
    expect(parseVersion('iptables v1.8.9 (nf_tables)\n')).toEqual({ version: '1.8.9', mode: 'nft' });
    expect(parseVersion('iptables v1.6.1\n')).toEqual({ version: '1.6.1' });
    expect(versionAtLeast('1.6.2', '1.6.2')).toBe(true);
    expect(versionAtLeast('1.6.1', '1.6.2')).toBe(false);
    expect(versionAtLeast('1.10', '1.6.2')).toBe(true);
  });

  it('a host whose rules are in legacy gets iptables-legacy-restore; an old iptables no --random-fully', async () => {
    const host = new FakeHost();
    host.version = '1.6.1';
    host.seed('legacy', 'v4', `*filter\n${Array.from({ length: 10 }, (_, i) => `-A INPUT -s 10.0.${i}.0/24 -j ACCEPT`).join('\n')}\nCOMMIT\n`);
    const ipt = new IptablesRestore({ run: host.run });
    await ipt.sync(desired(), config);
    expect((await ipt.backend()).mode).toBe('legacy');
    expect(host.save('legacy', 'v4')).toContain('-A IPVSOP-POSTROUTING -j MASQUERADE\n');
    expect(host.save('nft', 'v4')).not.toContain('IPVSOP');
  });

  it('kubelet\'s hint chain in nft wins; a forced backend is used as told', async () => {
    const host = new FakeHost();
    host.seed('nft', 'v4', '*mangle\n:KUBE-IPTABLES-HINT - [0:0]\nCOMMIT\n');
    host.seed('legacy', 'v4', `*filter\n${Array.from({ length: 20 }, (_, i) => `-A INPUT -s 10.0.${i}.0/24 -j ACCEPT`).join('\n')}\nCOMMIT\n`);
    expect((await new IptablesRestore({ run: host.run }).backend()).mode).toBe('nft');
    const forced = new IptablesRestore({ run: host.run, backend: 'legacy' });
    await forced.sync(desired(), config);
    expect(host.save('legacy', 'v4')).toContain(':IPVSOP-SERVICES - [0:0]');
  });

  it('prepare() detects the backend ahead of the first sync, which then detects nothing again', async () => {
    const host = new FakeHost();
    const ipt = new IptablesRestore({ run: host.run });
    await ipt.prepare();
    const detection = host.commands();
    expect(detection).toContain('iptables-nft-save');
    host.calls.length = 0;
    await ipt.sync(desired(np('a', '10.200.1.10', 30080)), config);
    expect(host.commands().filter((c) => /-V$|^ip6?tables-legacy/.test(c))).toEqual([]);
    expect(host.commands()).toEqual(['ipset', 'iptables-nft-save', 'ip6tables-nft-save', 'ipset', 'iptables-nft-restore', 'ip6tables-nft-restore']);
  });

  it('reads the hook jumps while the sets are written, and writes the rules only after both', async () => {
    const host = new FakeHost();
    const ipt = new IptablesRestore({ run: host.run });
    await ipt.prepare();
    host.calls.length = 0;
    // What had started when `ipset restore` was called, and what had ended when each restore was.
    const events: string[] = [];
    const run: typeof host.run = async (cmd, args, input) => {
      const name = `${cmd} ${args[0] ?? ''}`.trim();
      events.push(`start ${name}`);
      const r = await host.run(cmd, args, input);
      events.push(`end ${name}`);
      return r;
    };
    await new IptablesRestore({ run, backend: 'nft' }).sync(desired(np('a', '10.200.1.10', 30080)), config);
    const at = (e: string) => events.indexOf(e);
    expect(at('start iptables-nft-save')).toBeLessThan(at('end ipset restore'));
    expect(at('start ip6tables-nft-save')).toBeLessThan(at('end ipset restore'));
    for (const restore of ['iptables-nft-restore --noflush', 'ip6tables-nft-restore --noflush']) {
      expect(at(`start ${restore}`)).toBeGreaterThan(at('end ipset restore'));
      expect(at(`start ${restore}`)).toBeGreaterThan(at('end iptables-nft-save'));
      expect(at(`start ${restore}`)).toBeGreaterThan(at('end ip6tables-nft-save'));
    }
  });

  it('a failing save of the hook jumps fails the sync once the set step has ended too', async () => {
    const host = new FakeHost();
    let ipsetEnded = false;
    const run: typeof host.run = async (cmd, args, input) => {
      if (cmd === 'ip6tables-nft-save') return { code: 4, stdout: '', stderr: 'ip6tables-nft-save: broken' };
      const r = await host.run(cmd, args, input);
      if (cmd === 'ipset' && args[0] === 'restore') ipsetEnded = true;
      return r;
    };
    const ipt = new IptablesRestore({ run, backend: 'nft' });
    await expect(ipt.sync(desired(np('a', '10.200.1.10', 30080)), config)).rejects.toThrow(/ip6tables-nft-save exited with 4: .*broken/);
    expect(ipsetEnded).toBe(true);
    expect(host.save('nft', 'v4')).not.toContain('IPVSOP-SERVICES');
    expect(ipt.last).toBeUndefined();
  });

  it('a detection that fails in prepare() does not reject; the sync detects again and says why', async () => {
    const host = new FakeHost();
    let broken = true;
    const run: typeof host.run = (cmd, args, input) => (broken && /^ip6?tables/.test(cmd)
      ? Promise.reject(Object.assign(new Error(`spawn ${cmd} ENOENT`), { code: 'ENOENT' }))
      : host.run(cmd, args, input));
    const ipt = new IptablesRestore({ run });
    await expect(ipt.prepare()).resolves.toBeUndefined();
    await expect(ipt.sync(desired(), config)).rejects.toThrow();
    broken = false;
    await ipt.sync(desired(), config);
    expect((await ipt.backend()).mode).toBe('nft');
  });

  it('without the -nft/-legacy variants, plain iptables and its -V marker', async () => {
    const host = new FakeHost();
    // This host has only plain `iptables` (here backed by the fake's legacy tables).
    const probe: typeof host.run = (cmd, args, input) => (/^ip6?tables-(nft|legacy)/.test(cmd)
      ? Promise.reject(Object.assign(new Error(`spawn ${cmd} ENOENT`), { code: 'ENOENT' }))
      : host.run(cmd.replace(/^(ip6?tables)/, '$1-legacy'), args, input));
    const b = await new IptablesRestore({ run: probe }).backend();
    expect(b).toMatchObject({ mode: 'legacy', save: 'iptables-save', restore: 'iptables-restore', restore6: 'ip6tables-restore' });
  });
});

/** Whether a process of ours with this id still runs (kill 0 sends nothing). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Polls `f` until it gives a value (the test's timeout bounds the wait). */
async function waitFor<T>(f: () => T | undefined): Promise<T> {
  for (;;) {
    const v = f();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('IptablesRestore.drift (the periodic check, read-only)', () => {
  it('is in step after a sync, and names what was flushed, deleted, emptied or destroyed', async () => {
    const host = foreignHost();
    const ipt = new IptablesRestore({ run: host.run });
    const d = desired(np('a', '10.200.1.10', 30080), np('b', '10.200.1.11', 30081));
    await ipt.sync(d, config);
    host.calls.length = 0;
    expect(await ipt.drift(d, config)).toBeUndefined();
    // Read-only: it lists and saves, never restores.
    expect(host.commands()).toEqual(['ipset', 'iptables-nft-save', 'ip6tables-nft-save']);
    // The desired state moved on without a sync: the sets' sizes differ.
    expect(await ipt.drift(desired(np('a', '10.200.1.10', 30080)), config)).toBe('set IPVSOP-CLUSTER-IP has 2 members, not 1');
    // A set emptied by hand.
    host.sets.get('IPVSOP-NP-TCP')!.members.clear();
    expect(await ipt.drift(d, config)).toBe('set IPVSOP-NP-TCP has 0 members, not 2');
    await ipt.sync(d, config);
    // A rule deleted by hand, a chain flushed, a hook jump removed, a chain gone.
    host.seed('nft', 'v4', '*nat\n-D IPVSOP-EXTERNAL -j IPVSOP-MARK-MASQ\nCOMMIT\n');
    expect(await ipt.drift(d, config)).toBe('IPv4 nat chain IPVSOP-EXTERNAL has 2 rules, not 3');
    await ipt.sync(d, config);
    host.seed('nft', 'v6', '*filter\n:IPVSOP-FORWARD - [0:0]\nCOMMIT\n'); // --noflush: declaring a chain flushes it
    expect(await ipt.drift(d, config)).toBe('IPv6 filter chain IPVSOP-FORWARD has 0 rules, not 2');
    await ipt.sync(d, config);
    host.seed('nft', 'v4', '*nat\n-D OUTPUT -m comment --comment "ipvs-operator service portals" -j IPVSOP-SERVICES\nCOMMIT\n');
    expect(await ipt.drift(d, config)).toBe('IPv4 nat jump nat OUTPUT IPVSOP-SERVICES is missing');
    await ipt.sync(d, config);
    expect(await ipt.drift(d, config)).toBeUndefined();
    // A different configuration renders other rules (no clusterCIDRs: CLUSTER marks nothing).
    expect(await ipt.drift(d, { ...config, clusterCIDRs: [] })).toBe('IPv4 nat chain IPVSOP-CLUSTER has 2 rules, not 0');
  });

  it('ends when its signal aborts: no tool runs after, and the next check runs in full', async () => {
    const host = new FakeHost();
    const abort = new AbortController();
    // The signal aborts while the set listing runs (a change arrived).
    const run: typeof host.run = async (cmd, args, input, signal) => {
      if (cmd === 'ipset' && args[1] === '-t') abort.abort();
      return host.run(cmd, args, input, signal);
    };
    const ipt = new IptablesRestore({ run });
    const d = desired(np('a', '10.200.1.10', 30080));
    await ipt.sync(d, config);
    host.calls.length = 0;
    await expect(ipt.drift(d, config, abort.signal)).rejects.toMatchObject({ name: 'AbortError' });
    expect(host.commands()).toEqual(['ipset']);
    host.calls.length = 0;
    expect(await ipt.drift(d, config, new AbortController().signal)).toBeUndefined();
    expect(host.commands()).toEqual(['ipset', 'iptables-nft-save', 'ip6tables-nft-save']);
  });

  it('does not compare when the signal aborts during its last read, though that read ended', async () => {
    const host = new FakeHost();
    const abort = new AbortController();
    // The change arrives while the check's ip6tables-save runs; the save itself ends normally.
    let checking = false;
    const run: typeof host.run = async (cmd, args, input, signal) => {
      const out = await host.run(cmd, args, input, signal);
      if (checking && cmd === 'ip6tables-nft-save') abort.abort();
      return out;
    };
    const ipt = new IptablesRestore({ run });
    const d = desired(np('a', '10.200.1.10', 30080));
    await ipt.sync(d, config);
    host.calls.length = 0;
    // Drifted (a set emptied), yet no answer: the check is put off, not decided.
    const vips = [...host.sets.keys()].find((n) => n.includes('VIPS') && host.sets.get(n)!.members.size)!;
    host.sets.get(vips)!.members.clear();
    checking = true;
    await expect(ipt.drift(d, config, abort.signal)).rejects.toMatchObject({ name: 'AbortError' });
    expect(host.commands()).toEqual(['ipset', 'iptables-nft-save', 'ip6tables-nft-save']);
    expect(await ipt.drift(d, config)).toBe(`set ${vips} has 0 members, not 1`);
  });

  it('kills the running tool when the signal aborts (the production runner, a real child process)', async () => {
    const abort = new AbortController();
    const dir = mkdtempSync(join(tmpdir(), 'ipvsop-abort-'));
    const pidFile = join(dir, 'pid');
    // The shell becomes sleep (exec), so the pid it wrote is the child the runner started.
    const running = spawnRunner('sh', ['-c', `echo $$ > ${pidFile}; exec sleep 300`], undefined, abort.signal);
    const pid = Number(await waitFor(() => (existsSync(pidFile) ? readFileSync(pidFile, 'utf8').trim() || undefined : undefined)));
    expect(alive(pid)).toBe(true);
    abort.abort();
    await expect(running).rejects.toMatchObject({ name: 'AbortError' });
    await waitFor(() => (alive(pid) ? undefined : true));
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('a tool past its deadline', () => {
  it('is killed, even when it ignores SIGTERM, and the call fails with an IptablesError (a real child)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ipvsop-deadline-'));
    const pidFile = join(dir, 'pid');
    // An ignored signal stays ignored across exec: sleep itself ignores SIGTERM.
    const script = `trap '' TERM; echo $$ > ${pidFile}; exec sleep 300`;
    // The deadline fires once the child ignores SIGTERM (its pid written), not after a guessed time.
    let fire: (() => void) | undefined;
    const running = withDeadline(spawnRunner, 300, (f) => { fire = f; return () => undefined; })('sh', ['-c', script]);
    const failed = running.catch((e: unknown) => e);
    const pid = Number(await waitFor(() => (existsSync(pidFile) ? readFileSync(pidFile, 'utf8').trim() || undefined : undefined)));
    expect(alive(pid)).toBe(true);
    fire!();
    const e = await failed;
    expect(isIptablesError(e)).toBe(true);
    expect(e).toMatchObject({ code: 124, cmd: `sh -c ${script}` });
    await waitFor(() => (alive(pid) ? undefined : true));
    rmSync(dir, { recursive: true, force: true });
  });

  it('fails its sync even when the runner never answers; the next sync runs every tool again', async () => {
    const host = new FakeHost();
    let hang = true;
    // A runner that neither answers nor heeds its signal, for iptables-restore, once.
    const run: typeof host.run = (cmd, args, input, signal) =>
      hang && cmd.endsWith('-restore') && cmd !== 'ipset' ? new Promise(() => {}) : host.run(cmd, args, input, signal);
    const ipt = new IptablesRestore({ run, toolDeadlineMs: 50 });
    const d = desired(np('a', '10.200.1.10', 30080));
    const e = await ipt.sync(d, config).catch((err: unknown) => err);
    expect(isIptablesError(e) && e.code).toBe(124);
    hang = false;
    host.calls.length = 0;
    await ipt.sync(d, config);
    expect(host.commands()).toContain('ipset');
    expect(host.save('nft', 'v4')).toContain('-A IPVSOP-NODE-PORT');
  });

  it('ends with AbortError, not a deadline error, when the caller aborts first', async () => {
    const abort = new AbortController();
    const never: typeof spawnRunner = (_cmd, _args, _input, signal) => new Promise((_, reject) =>
      signal?.addEventListener('abort', () => reject(signal.reason)));
    const running = withDeadline(never, 60_000)('ipset', ['list', '-t'], undefined, abort.signal);
    abort.abort();
    await expect(running).rejects.toMatchObject({ name: 'AbortError' });
  });
});

describe('the drift check\'s member counts', () => {
  /** Members per set as the whole restore payload fills them (its `add <set>-tmp` lines). */
  const fromPayload = (d: Desired) => {
    const want = new Map<string, number>();
    for (const line of renderIpsets(d).split('\n')) {
      const create = /^create (\S+)-tmp /.exec(line);
      if (create) want.set(create[1]!, want.get(create[1]!) ?? 0);
      const add = /^add (\S+)-tmp /.exec(line);
      if (add) want.set(add[1]!, (want.get(add[1]!) ?? 0) + 1);
    }
    return want;
  };
  const both = ['IPv4', 'IPv6'] as const;

  it('are the payload\'s, kept for the same entries, and follow the live VIP set', () => {
    const services = Array.from({ length: 40 }, (_, i) => np(`s${i}`, `10.200.3.${i + 1}`, 30000 + i));
    const d = desired(...services);
    expect(d.sets.length).toBeGreaterThan(0);
    const first = wantedCounts(d, undefined, both);
    expect(first).toEqual(fromPayload(d));
    // The same entries again: the same counts (kept), and another desired state: its own.
    expect(wantedCounts(d, undefined, both)).toEqual(first);
    const fewer = desired(...services.slice(0, 7));
    expect(wantedCounts(fewer, undefined, both)).toEqual(fromPayload(fewer));
    // desired.vips is a live set: a VIP added without a new sets array is still counted.
    (d.vips as Set<string>).add('10.200.3.250');
    (d.vips as Set<string>).add('fd00:203::1');
    const grown = wantedCounts(d, undefined, both);
    expect(grown).toEqual(fromPayload(d));
    expect(grown.get('IPVSOP-VIPS')).toBe(first.get('IPVSOP-VIPS')! + 1);
    expect(grown.get('IPVSOP6-VIPS')).toBe(first.get('IPVSOP6-VIPS')! + 1);
  });
});
