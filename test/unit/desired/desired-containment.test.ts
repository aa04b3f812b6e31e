// One bad Service never poisons the desired state (issue 12): wrong-typed fields (as YAML can
// produce), values the kernel refuses and oversized annotations become Problems of that Service
// only; a Service whose build throws keeps its last good state. Address ranges: see fixtures.ts.
import { describe, expect, it } from '@jest/globals';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { PluginRegistry, nestingExceeds } from '../../../plugins/index.js';
import { optionsTooBig } from '../../../src/desired/scheduler.js';
import { DesiredState, buildDesired } from '../../../src/desired/state.js';
import { type Desired } from '../../../src/desired/types.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import { realServerProblems, virtualServerProblems } from '../../../src/ipvs/validate.js';
import { NODE, makeNode, makeService, makeSlice, render } from '../../support/fixtures.js';

const registry = new PluginRegistry();
const config = { ...defaultProxyConfig };

function build(services: V1Service[], slices: V1EndpointSlice[]): Desired {
  return buildDesired({ services, endpointSlices: slices, node: makeNode(), nodeName: NODE }, config, registry);
}

/** Sets a field to a value of any type, as a YAML document can. */
function raw(mutate: (s: Record<string, any>) => void): (s: V1Service) => void { // eslint-disable-line @typescript-eslint/no-explicit-any
  return (s) => mutate(s as unknown as Record<string, any>); // eslint-disable-line @typescript-eslint/no-explicit-any
}

const deepJson = `${'['.repeat(2000)}${']'.repeat(2000)}`;
const healthy = () => makeService('ns0', 'healthy', (s) => { s.spec!.clusterIP = '10.200.1.20'; s.spec!.clusterIPs = ['10.200.1.20']; });
const healthySlice = () => makeSlice('ns0', 'healthy', 'healthy-a', [{ ip: '10.10.1.9' }]);
const slice = () => makeSlice('ns1', 'svc1', 'svc1-a', [{ ip: '10.10.1.1' }]);

/** Every virtual and real server of the table passes the IPVS clients' validation. */
function refused(d: Desired): string[] {
  const out: string[] = [];
  for (const [key, v] of d.table) {
    out.push(...virtualServerProblems(v.vs).map((p) => `${key}: ${p}`));
    for (const rs of v.dests) out.push(...realServerProblems(v.vs, rs, true).map((p) => `${key}: ${p}`));
  }
  return out;
}

describe('a bad Service is a Problem of its own, never an exception', () => {
  it.each<[string, (s: V1Service) => void, string, RegExp, string | undefined]>([
    ['scheduler options nested 2,000 levels deep', (s) => { s.metadata!.annotations = { 'ipvs-operator.io/scheduler': 'mh', 'ipvs-operator.io/scheduler-options': deepJson }; },
      'InvalidSchedulerOptions', /nested deeper than 16/, 'TCP 10.200.1.10:80 rr'],
    ['scheduler options over 4 KiB', (s) => { s.metadata!.annotations = { 'ipvs-operator.io/scheduler-options': `{"a":"${'x'.repeat(5000)}"}` }; },
      'InvalidSchedulerOptions', /exceed the limit of 4096/, 'TCP 10.200.1.10:80 rr'],
    ['a numeric annotation value', raw((s) => { s.metadata.annotations = { 'ipvs-operator.io/scheduler': 7 }; }),
      'InvalidSchedulerOptions', /scheduler: 7 is not a string/, 'TCP 10.200.1.10:80 rr'],
    ['clusterIP as a number', raw((s) => { s.spec.clusterIP = 10; s.spec.clusterIPs = undefined; }),
      'InvalidField', /spec\.clusterIP: 10 is not a string/, undefined],
    ['clusterIPs holding a number', raw((s) => { s.spec.clusterIPs = [10]; }),
      'InvalidField', /spec\.clusterIPs\[0\]: 10 is not a string/, 'TCP 10.200.1.10:80 rr'],
    ['ports: [null]', raw((s) => { s.spec.ports = [null]; }), 'InvalidField', /spec\.ports\[0\]: null is not an object/, undefined],
    ['ports as a string', raw((s) => { s.spec.ports = 'http'; }), 'InvalidField', /spec\.ports: "http" is not a list/, undefined],
    ['externalIPs as an object', raw((s) => { s.spec.externalIPs = { a: 1 }; }), 'InvalidField', /spec\.externalIPs: an object is not a list/, 'TCP 10.200.1.10:80 rr'],
    ['port 0', (s) => { s.spec!.ports![0]!.port = 0; }, 'InvalidPort', /port 0 is not an integer in 1\.\.65535/, undefined],
    ['port 70000', (s) => { s.spec!.ports![0]!.port = 70000; }, 'InvalidPort', /port 70000/, undefined],
    ['port -1', (s) => { s.spec!.ports![0]!.port = -1; }, 'InvalidPort', /port -1/, undefined],
    ['port 1.5', (s) => { s.spec!.ports![0]!.port = 1.5; }, 'InvalidPort', /port 1\.5/, undefined],
    ['port "80" as a string', raw((s) => { s.spec.ports[0].port = '80'; }), 'InvalidPort', /port "80"/, undefined],
    ['nodePort 99999', (s) => { s.spec!.type = 'NodePort'; s.spec!.ports![0]!.nodePort = 99999; },
      'InvalidPort', /nodePort 99999.*no NodePort programmed/, 'TCP 10.200.1.10:80 rr'],
    ['affinity timeout -5', (s) => { s.spec!.sessionAffinity = 'ClientIP'; s.spec!.sessionAffinityConfig = { clientIP: { timeoutSeconds: -5 } }; },
      'InvalidField', /timeoutSeconds: -5 is not an integer in 1\.\.86400; using 10800/, 'TCP 10.200.1.10:80 rr persistent=10800/32'],
    ['LB ingress as a string', raw((s) => { s.spec.type = 'LoadBalancer'; s.status = { loadBalancer: { ingress: '203.0.113.5' } }; }),
      'InvalidField', /status\.loadBalancer\.ingress: "203\.0\.113\.5" is not a list/, 'TCP 10.200.1.10:80 rr'],
  ])('%s', (_name, mutate, reason, message, firstLine) => {
    let d: Desired | undefined;
    expect(() => { d = build([makeService('ns1', 'svc1', mutate), healthy()], [slice(), healthySlice()]); }).not.toThrow();
    const mine = d!.problems.filter((p) => p.service === 'ns1/svc1');
    expect(mine).toEqual(expect.arrayContaining([expect.objectContaining({ reason, message: expect.stringMatching(message) })]));
    expect(d!.problems.filter((p) => p.service !== 'ns1/svc1')).toEqual([]);
    const text = render(d!.table);
    if (firstLine) expect(text).toContain(`add-service ${firstLine}`);
    else expect(text).not.toContain('10.200.1.10');
    expect(text).toContain('add-service TCP 10.200.1.20:80 rr'); // the healthy Service is untouched
    expect(refused(d!)).toEqual([]);
  });

  it('an IPv6 address in an IPv4 slice is left out, never a cross-family masq real server', () => {
    const bad = makeSlice('ns1', 'svc1', 'svc1-a', [{ ip: '10.10.1.1' }, { ip: 'fd00:10::1' }]);
    const d = build([makeService('ns1', 'svc1')], [bad]);
    expect(render(d.table)).toBe('add-service TCP 10.200.1.10:80 rr\nadd-dest TCP 10.200.1.10:80 -> 10.10.1.1:8080 w=1 masq');
    expect(d.sets.filter((s) => s.address?.includes(':') && s.family === 'IPv4')).toEqual([]);
  });

  it('wrong-typed slice fields are skipped: endpoints: [null], ports: [7], addresses: [5]', () => {
    const s = makeSlice('ns1', 'svc1', 'svc1-a', [{ ip: '10.10.1.1' }]) as unknown as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    const t = structuredClone(s);
    s.endpoints.push(null, { addresses: [5] }, { addresses: '10.10.1.2' }, { addresses: ['10.10.1.3'], conditions: 'yes' });
    t.metadata.name = 'svc1-b';
    t.ports = [7, null];
    const d = build([makeService('ns1', 'svc1')], [s as V1EndpointSlice, t as V1EndpointSlice]);
    expect(render(d.table)).toBe([
      'add-service TCP 10.200.1.10:80 rr',
      'add-dest TCP 10.200.1.10:80 -> 10.10.1.1:8080 w=1 masq',
      'add-dest TCP 10.200.1.10:80 -> 10.10.1.3:8080 w=1 masq',
    ].join('\n'));
  });

  it('a wrong-typed Node (addresses: "x", labels: 5) yields no NodePort addresses, not an exception', () => {
    const node = makeNode((n) => { (n as unknown as Record<string, any>).status.addresses = 'x'; (n.metadata as Record<string, unknown>).labels = 5; }); // eslint-disable-line @typescript-eslint/no-explicit-any
    const d = buildDesired({ services: [makeService('ns1', 'svc1', (s) => { s.spec!.type = 'NodePort'; s.spec!.ports![0]!.nodePort = 30080; })],
      endpointSlices: [slice()], node, nodeName: NODE }, config, registry);
    expect(render(d.table)).toBe('add-service TCP 10.200.1.10:80 rr\nadd-dest TCP 10.200.1.10:80 -> 10.10.1.1:8080 w=1 masq');
  });
});

describe('DesiredState.sync contains a Service whose build throws', () => {
  /** A Service whose spec getter throws: stands for any bug a strange object may trigger. */
  function throwing(): V1Service {
    const s = makeService('ns1', 'svc1', (x) => { x.metadata!.resourceVersion = '2'; });
    Object.defineProperty(s, 'spec', { get() { throw new RangeError('Maximum call stack size exceeded'); } });
    return s;
  }

  it('keeps the last good entry with a BuildFailed problem, syncs the others, and recovers', () => {
    const state = new DesiredState(config, registry, NODE);
    state.setNode(makeNode());
    state.setService(makeService('ns1', 'svc1'));
    state.setSlice(slice());
    state.sync();
    const good = render(state.desiredTable);
    expect(good).toContain('add-service TCP 10.200.1.10:80 rr');

    state.setService(throwing());
    state.setService(healthy());
    state.setSlice(healthySlice());
    expect(() => state.sync()).not.toThrow();
    expect(state.problems()).toEqual([expect.objectContaining({
      service: 'ns1/svc1', reason: 'BuildFailed', message: expect.stringMatching(/RangeError: Maximum call stack.*last good state stays programmed/) })]);
    expect(render(state.desiredTable)).toContain('add-service TCP 10.200.1.10:80 rr');
    expect(render(state.desiredTable)).toContain('add-service TCP 10.200.1.20:80 rr');
    expect(state.sync().recomputed).toBe(0); // the dirty set was emptied

    state.setService(makeService('ns1', 'svc1', (x) => { x.metadata!.resourceVersion = '3'; x.spec!.ports![0]!.port = 81; }));
    state.sync();
    expect(state.problems()).toEqual([]);
    expect(render(state.desiredTable)).toContain('add-service TCP 10.200.1.10:81 rr');
    expect(render(state.desiredTable)).not.toContain('10.200.1.10:80');
  });

  it('a Service that throws on its first build has nothing programmed, and a problem', () => {
    const state = new DesiredState(config, registry, NODE);
    state.setService(throwing());
    state.sync();
    expect(state.desiredTable.size).toBe(0);
    expect(state.problems()).toEqual([expect.objectContaining({ service: 'ns1/svc1', reason: 'BuildFailed',
      message: expect.not.stringMatching(/last good/) })]);
  });
});

describe('annotation limits, checked without recursion', () => {
  it.each<[string, string, string | undefined]>([
    ['flat options', '{"ipv4Prefix": 24}', undefined],
    ['brackets inside a string do not count', '{"a": "[[[[[[[[[[[[[[[[[[[[[[["}', undefined],
    ['nor after an escaped quote', '{"a": "\\"[[[[[[[[[[[[[[[[[[[[[[["}', undefined],
    ['16 levels', `${'['.repeat(16)}${']'.repeat(16)}`, undefined],
    ['17 levels', `${'['.repeat(17)}${']'.repeat(17)}`, 'nested deeper than 16 levels'],
    ['2,000 levels', deepJson, 'nested deeper than 16 levels'],
    ['4097 characters', 'x'.repeat(4097), '4097 characters exceed the limit of 4096'],
  ])('%s', (_name, text, why) => {
    expect(optionsTooBig(text)).toBe(why);
  });

  it('validateOptions refuses deep values instead of overflowing the stack', () => {
    let deep: unknown = {};
    for (let i = 0; i < 5000; i++) deep = { a: deep };
    expect(nestingExceeds(deep, 16)).toBe(true);
    expect(nestingExceeds({ a: { b: [1] } }, 16)).toBe(false);
    expect(registry.validateOptions('mh', deep)).toEqual({ ok: false, errors: 'options nested deeper than 16 levels' });
  });
});
