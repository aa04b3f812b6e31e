// Plugins as a hostile or careless author writes them (issue "Never wedged"): option patterns that
// backtrack without bound are refused at load, a plugin that mutates what it is given changes
// nothing another Service sees, and every way a resolve() can fail falls back for that Service only.
import { describe, expect, it } from '@jest/globals';
import type { V1Service } from '@kubernetes/client-node';
import { PluginRegistry } from '../../../plugins/index.js';
import { findUnsafePattern, unsafePattern } from '../../../plugins/safe-pattern.js';
import { buildDesired } from '../../../src/desired/state.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import { NODE, makeNode, makeService, makeSlice, render } from '../../support/fixtures.js';

const plugin = (name: string, extra: Record<string, unknown>) => ({
  name, description: 'x', kernelScheduler: 'rr', kernelModule: 'ip_vs_rr', optionsSchema: { type: 'object' },
  resolve: () => ({ scheduler: 'rr', flags: 0, weights: [1] }), ...extra,
});

describe('option patterns', () => {
  it.each(['^(a+)+$', '(a|a)*', '^(\\d+)*$', '(x+x+)+y', '^([a-z]+\\.)+$', '(a{1,5}){2,}', '(.*)\\1', '(?=a)a', '(?<!b)a', '((ab)*c)+'])('%s is refused', (p) => {
    expect(unsafePattern(p)).toBeDefined();
  });
  it.each(['^[a-z0-9-]+$', '^(?:abc)+$', '^node-[0-9]{1,3}$', '^(a|b)$', '^[a-z]+(\\.[a-z]+)?$', '^(?<zone>[a-z]+)-[0-9]+$', '^(ab){2}$'])('%s is allowed', (p) => {
    expect(unsafePattern(p)).toBeUndefined();
  });
  it('finds a pattern anywhere in a schema, patternProperties keys included', () => {
    expect(findUnsafePattern({ type: 'object', properties: { a: { items: [{ pattern: '^(a+)+$' }] } } })).toMatch(/^#\/properties\/a\/items\/0\/pattern "\^\(a\+\)\+\$"/);
    expect(findUnsafePattern({ patternProperties: { '(x*)*': {} } })).toMatch(/patternProperties/);
    expect(findUnsafePattern({ properties: { a: { pattern: '^[a-z]+$' } } })).toBeUndefined();
  });
  it('a plugin whose schema could freeze the event loop is refused at load, with why', () => {
    const r = new PluginRegistry([]);
    const problem = r.register(plugin('redos', { optionsSchema: { type: 'object', properties: { host: { type: 'string', pattern: '^(a+)+$' } } } }), 'redos.js');
    expect(problem).toMatchObject({ reason: 'InvalidPlugin' });
    expect(problem!.message).toMatch(/^redos\.js: options schema refused: #\/properties\/host\/pattern .* could backtrack without bound/);
    expect(r.get('redos')).toBeUndefined();
  });
});

describe('a plugin failing in any way', () => {
  const svc = (name: string, ip: string, scheduler?: string): V1Service => makeService('ns1', name, (s) => {
    s.spec!.clusterIPs = [ip];
    if (scheduler) s.metadata!.annotations = { 'ipvs-operator.io/scheduler': scheduler };
  });
  const slices = [makeSlice('ns1', 'bad', 'bad-a', [{ ip: '10.10.1.1' }]), makeSlice('ns1', 'good', 'good-a', [{ ip: '10.10.1.2' }])];
  const throwingGetter = { get scheduler(): string { throw new Error('getter'); }, flags: 0, weights: [1] };
  const cases: Array<[string, () => unknown]> = [
    ['throws a non-Error', () => { throw 42; }],
    ['returns a getter that throws', () => throwingGetter],
    ['returns a persistence prefix out of range', () => ({ scheduler: 'rr', flags: 0, weights: [1], persistence: { ipv4Prefix: 99 } })],
    ['returns a string', () => 'rr'],
    ['returns a promise', () => Promise.resolve({ scheduler: 'rr', flags: 0, weights: [1] })],
    ['mutates the shared scheduler set', (...a: unknown[]) => { (a[2] as { availableSchedulers: Set<string> }).availableSchedulers.add('evil'); return { scheduler: 'rr', flags: 0, weights: [1] }; }],
    ['mutates its endpoints', (...a: unknown[]) => { (a[1] as Array<{ address: string }>)[0]!.address = '1.2.3.4'; return { scheduler: 'rr', flags: 0, weights: [1] }; }],
    ['mutates its options', (...a: unknown[]) => { (a[0] as Record<string, unknown>).evil = 1; return { scheduler: 'rr', flags: 0, weights: [1] }; }],
  ];
  it.each(cases)('%s: that Service falls back to the default with a problem; the others are untouched', (_what, resolve) => {
    const r = new PluginRegistry();
    expect(r.register(plugin('hostile', { resolve }), 'hostile.js')).toBeUndefined();
    const available = new Set(['rr', 'lc', 'wlc']);
    const d = buildDesired({ services: [svc('bad', '10.200.1.10', 'hostile'), svc('good', '10.200.1.11', 'lc')], endpointSlices: slices, node: makeNode(), nodeName: NODE },
      defaultProxyConfig, r, { availableSchedulers: available });
    expect(render(d.table)).toContain('add-service TCP 10.200.1.10:80 rr');
    expect(render(d.table)).toContain('add-dest TCP 10.200.1.10:80 -> 10.10.1.1:8080 w=1 masq');
    expect(render(d.table)).toContain('add-service TCP 10.200.1.11:80 lc');
    expect(d.problems).toMatchObject([{ service: 'ns1/bad', reason: 'SchedulerPluginFailed' }]);
    expect([...available].sort()).toEqual(['lc', 'rr', 'wlc']);
  });
});
