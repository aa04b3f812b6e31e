import { describe, expect, it, jest } from '@jest/globals';
import { Ajv } from 'ajv';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PluginRegistry, builtinPlugins, unavailableReason } from '../../../plugins/index.js';
import type { PluginContext, PluginEndpoint } from '../../../plugins/types.js';
import { SCHED_SH_FALLBACK, SCHED_SH_PORT } from '../../../src/model/ipvs.js';
import { loadPluginsFrom } from '../../../src/plugins/load.js';

// Address ranges: 10.10.0.0/16 are pods; nodes are node-a (this node, zone-a), node-b (zone-a),
// node-c (zone-b).
const ctx: PluginContext = { nodeName: 'node-a', nodeZone: 'zone-a', kernelVersion: '6.1.0-18-amd64' };

function makeEndpoint(n: number, mutate?: (ep: PluginEndpoint) => void): PluginEndpoint {
  const ep: PluginEndpoint = {
    address: `10.10.1.${n}`, port: 80, family: 'IPv4', nodeName: 'node-a', zone: 'zone-a',
    podName: `web-v1-${n}`, sliceLabels: {}, ready: true, serving: true, terminating: false, local: true,
  };
  mutate?.(ep);
  return ep;
}

/** Four endpoints: on node-a (local), node-b (zone-a), node-c (zone-b, pod web-v2), node-c (canary slice). */
const endpoints: PluginEndpoint[] = [
  makeEndpoint(1),
  makeEndpoint(2, (e) => { e.nodeName = 'node-b'; e.local = false; }),
  makeEndpoint(3, (e) => { e.nodeName = 'node-c'; e.zone = 'zone-b'; e.local = false; e.podName = 'web-v2-abc'; }),
  makeEndpoint(4, (e) => { e.nodeName = 'node-c'; e.zone = 'zone-b'; e.local = false; e.sliceLabels = { track: 'canary' }; }),
];

const registry = new PluginRegistry();

function resolve(name: string, options: unknown, eps = endpoints) {
  const v = registry.validateOptions(name, options);
  if (!v.ok) throw new Error(v.errors);
  return registry.get(name)!.resolve(v.options, eps, ctx);
}

describe('built-in plugins', () => {
  it('registers every scheduler the issue asks for', () => {
    expect(registry.names()).toEqual(['dh', 'fo', 'lblc', 'lblcr', 'lc', 'mh', 'nq', 'ovf', 'rr', 'sed', 'sh', 'twos', 'wlc', 'wrr']);
  });

  it.each(builtinPlugins.map((p) => [p.name, p.name === 'ovf' ? 100 : 1] as const))(
    '%s: default options give its kernel scheduler, no flags and equal weights', (name, w) => {
      const r = resolve(name, {});
      expect(r).toEqual({ scheduler: registry.get(name)!.kernelScheduler, flags: 0, weights: [w, w, w, w] });
      expect(registry.get(name)!.kernelModule).toBe(`ip_vs_${r.scheduler}`);
    });

  it.each([
    ['wrr', { weights: { byNode: { 'node-b': 3 } } }, [1, 3, 1, 1]],
    ['wlc', { weights: { byZone: { 'zone-b': 2 }, default: 5 } }, [5, 5, 2, 2]],
    ['sed', { weights: { local: 4 } }, [4, 1, 1, 1]],
    ['nq', { weights: { byPod: [{ prefix: 'web-v2-', weight: 7 }] } }, [1, 1, 7, 1]],
    ['lblc', { weights: { byPod: [{ name: 'web-v1-2', weight: 0 }] } }, [1, 0, 1, 1]],
    ['lblcr', { weights: { bySliceLabel: [{ selector: { track: 'canary' }, weight: 9 }] } }, [1, 1, 1, 9]],
    ['dh', { weights: { default: 2 } }, [2, 2, 2, 2]],
    ['ovf', { weights: { byNode: { 'node-a': 500 } } }, [500, 100, 100, 100]],
    // Precedence: pod > slice label > node > local > zone > default.
    ['wrr', { weights: { byZone: { 'zone-a': 2, 'zone-b': 3 }, local: 4, byNode: { 'node-c': 5 },
      bySliceLabel: [{ selector: { track: 'canary' }, weight: 6 }], byPod: [{ prefix: 'web-v2', weight: 8 }] } }, [4, 2, 8, 6]],
  ])('%s %j -> weights %j', (name, options, weights) => {
    expect(resolve(name, options).weights).toEqual(weights);
  });

  it.each([
    ['sh', { 'sh-fallback': true }, SCHED_SH_FALLBACK],
    ['sh', { 'sh-port': true }, SCHED_SH_PORT],
    ['sh', { 'sh-fallback': true, 'sh-port': true }, SCHED_SH_FALLBACK | SCHED_SH_PORT],
    ['sh', { 'sh-fallback': false }, 0],
    ['mh', { 'sh-port': true }, SCHED_SH_PORT],
    ['mh', { 'mh-fallback': true, 'mh-port': true }, SCHED_SH_FALLBACK | SCHED_SH_PORT],
  ])('%s %j -> flags %d', (name, options, flags) => {
    expect(resolve(name, options).flags).toBe(flags);
  });

  it.each([
    [{ prefer: [{ zone: 'zone-b' }] }, [1, 1, 2, 2]],
    [{ prefer: [{ local: true }, { zone: 'zone-a' }], others: 0 }, [3, 2, 0, 0]],
    [{ prefer: [{ node: 'node-c' }, { podPrefix: 'web-v1-' }] }, [2, 2, 3, 3]],
    [{ weights: { byNode: { 'node-b': 10 } } }, [1, 10, 1, 1]],
  ])('fo %j -> weights %j (highest first)', (options, weights) => {
    expect(resolve('fo', options).weights).toEqual(weights);
  });

  it('passes the affinity netmask through as persistence prefixes', () => {
    expect(resolve('rr', { affinityNetmask: { ipv4: 24, ipv6: 64 } }).persistence).toEqual({ ipv4Prefix: 24, ipv6Prefix: 64 });
    expect(resolve('wrr', { affinityNetmask: { ipv4: 16 } }).persistence).toEqual({ ipv4Prefix: 16 });
  });

  it.each([
    ['rr', { weights: {} }, 'unknown property "weights" (allowed: affinityNetmask)'],
    ['lc', { foo: 1 }, 'unknown property "foo"'],
    ['wrr', { weights: { byNode: { 'node-a': -1 } } }, 'options.weights.byNode.node-a: must be >= 0'],
    ['wrr', { weights: { byNode: { 'node-a': 1.5 } } }, 'must be integer'],
    ['wrr', { weights: { default: 70000 } }, 'must be <= 65535'],
    ['wrr', { weights: { byZone: 'zone-a' } }, 'options.weights.byZone: must be object'],
    ['wrr', { weights: { byPod: [{ prefix: 'x' }] } }, "must have required property 'weight'"],
    ['wrr', { weights: { byPod: [{ weight: 2 }] } }, 'must NOT have fewer than 2 properties'],
    ['wrr', { weights: { bySliceLabel: [{ selector: {}, weight: 2 }] } }, 'must NOT have fewer than 1 properties'],
    ['wrr', { weights: { byHost: {} } }, 'unknown property "byHost" (allowed: default, byNode, byZone, local, byPod, bySliceLabel)'],
    ['wrr', { affinityNetmask: { ipv4: 33 } }, 'options.affinityNetmask.ipv4: must be <= 32'],
    ['sh', { 'sh-fallback': 'yes' }, "options.sh-fallback: must be boolean"],
    ['sh', { 'mh-port': true }, 'unknown property "mh-port"'],
    ['fo', { prefer: [] }, 'must NOT have fewer than 1 items'],
    ['fo', { prefer: [{ zone: 'a', node: 'b' }] }, 'must NOT have more than 1 properties'],
    ['fo', { prefer: [{ local: false }] }, 'must be equal to constant'],
    ['fo', { prefer: [{ zone: 'a' }], weights: {} }, 'give at most one of prefer, weights'],
    ['wrr', [1, 2], 'options: must be object'],
    ['wrr', 'fast', 'options: must be object'],
  ])('%s refuses %j: %s', (name, options, message) => {
    const v = registry.validateOptions(name, options);
    expect(v.ok).toBe(false);
    expect(v.ok ? '' : v.errors).toContain(message);
  });

  it('does not mutate the options it validates', () => {
    const options = { weights: {} };
    registry.validateOptions('wrr', options);
    expect(options).toEqual({ weights: {} });
  });
});

describe('kernel availability', () => {
  const twos = registry.get('twos')!;
  it.each<[string, PluginContext, boolean]>([
    ['kernel 6.1', { nodeName: 'n', kernelVersion: '6.1.0-18-amd64' }, false],
    ['kernel 5.15', { nodeName: 'n', kernelVersion: '5.15.0' }, false],
    ['kernel 6.2', { nodeName: 'n', kernelVersion: '6.2.0' }, true],
    ['kernel 6.18', { nodeName: 'n', kernelVersion: '6.18.44-fc' }, true],
    ['6.8 without the module', { nodeName: 'n', kernelVersion: '6.8.0', availableSchedulers: new Set(['rr']) }, false],
    ['nothing known', { nodeName: 'n' }, true],
  ])('twos on %s: available=%s', (_name, context, available) => {
    expect(unavailableReason(twos, context) === undefined).toBe(available);
  });
  it('names the missing module', () => {
    expect(unavailableReason(registry.get('lblcr')!, { nodeName: 'n', availableSchedulers: new Set(['rr']) }))
      .toContain('ip_vs_lblcr');
    expect(unavailableReason(twos, ctx)).toContain('needs kernel >= 6.2');
  });
});

describe('extra plugins', () => {
  const good = { name: 'my-rr', description: 'x', kernelScheduler: 'rr', kernelModule: 'ip_vs_rr', optionsSchema: { type: 'object' },
    resolve: () => ({ scheduler: 'rr', flags: 0, weights: [] }) };
  it.each<[string, unknown, string]>([
    ['not an object', 42, 'InvalidPlugin'],
    ['bad name', { ...good, name: 'My RR' }, 'InvalidPlugin'],
    ['scheduler name too long', { ...good, kernelScheduler: 'a-very-long-sched' }, 'InvalidPlugin'],
    ['no resolve', { ...good, resolve: 'rr' }, 'InvalidPlugin'],
    ['schema that does not compile', { ...good, optionsSchema: { type: 'frobnicate' } }, 'InvalidPlugin'],
    ['schema refusing {}', { ...good, optionsSchema: { type: 'object', required: ['x'] } }, 'InvalidPlugin'],
    ['duplicate of a built-in', { ...good, name: 'rr' }, 'DuplicatePlugin'],
  ])('refuses %s', (_name, candidate, reason) => {
    const r = new PluginRegistry();
    expect(r.register(candidate, '/plugins/x.js')?.reason).toBe(reason);
    expect(r.names()).toHaveLength(builtinPlugins.length);
  });

  it('compiles no built-in schema at run time; a constructor plugin\'s at first use, a registered one at once', () => {
    const compile = jest.spyOn(Ajv.prototype, 'compile');
    try {
      const r = new PluginRegistry();
      for (const p of builtinPlugins) expect(r.validateOptions(p.name, {}).ok).toBe(true);
      expect(r.validateOptions('wrr', { weights: { default: 2 } })).toEqual({ ok: true, options: { weights: { default: 2 } } });
      expect(r.validateOptions('wrr', { weights: { default: 'x' } })).toEqual(
        { ok: false, errors: 'options.weights.default: must be integer' });
      expect(compile).not.toHaveBeenCalled();
      const lazy = new PluginRegistry([{ ...good, name: 'other' }]);
      expect(compile).not.toHaveBeenCalled();
      lazy.validateOptions('other', {});
      lazy.validateOptions('other', { a: 1 });
      expect(compile).toHaveBeenCalledTimes(1);
      expect(r.register(good, '/plugins/y.js')).toBeUndefined();
      expect(compile).toHaveBeenCalledTimes(2);
    } finally {
      compile.mockRestore();
    }
  });

  it('refuses a Service naming a constructor plugin whose schema does not compile, with the reason', () => {
    const r = new PluginRegistry([{ ...good, optionsSchema: { type: 'frobnicate' } } as never]);
    const bad = { ok: false, errors: expect.stringContaining('options schema does not compile') };
    expect(r.validateOptions('my-rr', {})).toEqual(bad);
    expect(r.validateOptions('my-rr', {})).toEqual(bad);
    const strict = new PluginRegistry([{ ...good, optionsSchema: { type: 'object', required: ['x'] } } as never]);
    expect(strict.validateOptions('my-rr', { x: 1 })).toEqual(
      { ok: false, errors: expect.stringContaining('"{}" must be valid options') });
  });

  it('loads a directory, skipping broken files with problems', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ipvs-plugins-'));
    try {
      writeFileSync(join(dir, 'a-good.mjs'), `export const plugin = { name: 'pinned', description: 'all to the first',
        kernelScheduler: 'fo', kernelModule: 'ip_vs_fo', optionsSchema: { type: 'object' },
        resolve: (_o, eps) => ({ scheduler: 'fo', flags: 0, weights: eps.map((_e, i) => (i === 0 ? 2 : 1)) }) };`);
      writeFileSync(join(dir, 'c-empty.mjs'), 'export const nothing = 1;');
      writeFileSync(join(dir, 'd-throws.mjs'), 'throw new Error("boom at import");');
      writeFileSync(join(dir, 'notes.txt'), 'ignored');
      const r = new PluginRegistry();
      const problems = await loadPluginsFrom(dir, r);
      expect(problems.map((p) => [p.source.slice(dir.length + 1), p.reason])).toEqual([
        ['c-empty.mjs', 'InvalidPlugin'], ['d-throws.mjs', 'PluginLoadFailed']]);
      expect(r.get('pinned')?.resolve({}, endpoints, ctx).weights).toEqual([2, 1, 1, 1]);
      expect(await loadPluginsFrom(join(dir, 'missing'), r)).toMatchObject([{ reason: 'PluginDirUnreadable' }]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // Jest's ESM loader fails the running test on a SyntaxError in any imported file, even a caught
  // one, so this case runs the loader in plain node, as the operator does.
  it('reports a plugin with a syntax error (plain node)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ipvs-plugins-'));
    try {
      writeFileSync(join(dir, 'b-syntax.mjs'), 'export const plugin = {');
      const root = new URL('../../../', import.meta.url).href;
      const out = execFileSync(process.execPath, ['--input-type=module', '-e', `
        const { PluginRegistry } = await import('${root}plugins/index.js');
        const { loadPluginsFrom } = await import('${root}src/plugins/load.js');
        const r = new PluginRegistry();
        const problems = await loadPluginsFrom(${JSON.stringify(dir)}, r);
        console.log(JSON.stringify({ reasons: problems.map((p) => p.reason), names: r.names().length }));`]);
      expect(JSON.parse(out.toString())).toEqual({ reasons: ['PluginLoadFailed'], names: builtinPlugins.length });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
