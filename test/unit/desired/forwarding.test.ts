// The forwarding annotation (ipvs-operator.io/forwarding: masq | tunnel, direct server return):
// its parsing, the desired table and sets it gives, the plan from a masqueraded table to a
// tunnelled one, and FakeIpvs applying it as the kernel does. Address ranges: fixtures.ts (cluster
// IPs 10.200.1.0/24, pods 10.10.0.0/16, this node 192.168.0.10, external/LB 203.0.113.0/24 and
// 2001:db8::/64).
import { describe, expect, it } from '@jest/globals';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { PluginRegistry } from '../../../plugins/index.js';
import { DesiredState, buildDesired } from '../../../src/desired/state.js';
import { formatSetEntry } from '../../../src/desired/compare.js';
import { FORWARDING_ANNOTATION, chooseForwarding, tunnelledKind } from '../../../src/desired/forwarding.js';
import type { Problem, VipKind } from '../../../src/desired/types.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import { formatOp } from '../../../src/model/ipvs.js';
import { planIpvs } from '../../../src/plan/plan.js';
import { makeOwnership } from '../../../src/plan/ownership.js';
import { renderIpsets, renderIptables } from '../../../src/iptables/render.js';
import { NODE, makeNode, makeService, makeSlice, render } from '../../support/fixtures.js';

const registry = new PluginRegistry();
const build = (services: V1Service[], slices: V1EndpointSlice[]) =>
  buildDesired({ services, endpointSlices: slices, node: makeNode(), nodeName: NODE }, defaultProxyConfig, registry);

/** A LoadBalancer Service with an external IP, an LB IP and a NodePort; its pods listen on the Service port. */
const exposed = (forwarding?: string, mutate?: (s: V1Service) => void) => makeService('ns1', 'web', (s) => {
  s.spec!.type = 'LoadBalancer';
  s.spec!.externalIPs = ['203.0.113.7'];
  s.spec!.ports![0]!.nodePort = 30080;
  s.status = { loadBalancer: { ingress: [{ ip: '203.0.113.8' }] } };
  if (forwarding !== undefined) s.metadata!.annotations = { [FORWARDING_ANNOTATION]: forwarding };
  mutate?.(s);
});
/** Its endpoints on port 80 (`port` to make them listen elsewhere), one on another node. */
const pods = (port = 80) => makeSlice('ns1', 'web', 'web-1', [{ ip: '10.10.1.2' }, { ip: '10.10.2.3', node: 'node-b' }],
  (sl) => { sl.ports![0]!.port = port; });

const MASQ_TABLE = [
  'add-service TCP 10.200.1.10:80 rr',
  'add-dest TCP 10.200.1.10:80 -> 10.10.1.2:80 w=1 masq',
  'add-dest TCP 10.200.1.10:80 -> 10.10.2.3:80 w=1 masq',
  'add-service TCP 192.168.0.10:30080 rr',
  'add-dest TCP 192.168.0.10:30080 -> 10.10.1.2:80 w=1 masq',
  'add-dest TCP 192.168.0.10:30080 -> 10.10.2.3:80 w=1 masq',
  'add-service TCP 203.0.113.7:80 rr',
  'add-dest TCP 203.0.113.7:80 -> 10.10.1.2:80 w=1 masq',
  'add-dest TCP 203.0.113.7:80 -> 10.10.2.3:80 w=1 masq',
  'add-service TCP 203.0.113.8:80 rr',
  'add-dest TCP 203.0.113.8:80 -> 10.10.1.2:80 w=1 masq',
  'add-dest TCP 203.0.113.8:80 -> 10.10.2.3:80 w=1 masq',
].join('\n');
/** ClusterIP and NodePort stay masqueraded; the external IP and the LB IP are ipip tunnel destinations. */
const TUNNEL_TABLE = MASQ_TABLE.replace(/(203\.0\.113\.[78]:80 -> [0-9.]+:80 w=1) masq/g, '$1 tunnel tun=ipip');

const localSets = (sets: ReturnType<typeof build>['sets']) =>
  sets.filter((e) => e.set.includes('-LOCAL')).map(formatSetEntry);

describe('chooseForwarding: the annotation value', () => {
  it.each<[string, unknown, string, string[]]>([
    ['absent', undefined, 'masq', []],
    ['null (YAML "~")', null, 'masq', []],
    ['empty', '', 'masq', []],
    ['masq', 'masq', 'masq', []],
    ['tunnel', 'tunnel', 'tunnel', []],
    ['tunnel with blanks around', ' tunnel\n', 'tunnel', []],
    ['another case (values are lower-case, as kube-router\'s)', 'Tunnel', 'masq', ['InvalidForwarding']],
    ['kube-router\'s "dsr"', 'dsr', 'masq', ['InvalidForwarding']],
    ['a forwarding method services cannot choose', 'route', 'masq', ['InvalidForwarding']],
    ['a number (a YAML directory can hold anything)', 1, 'masq', ['InvalidForwarding']],
    ['a list', ['tunnel'], 'masq', ['InvalidForwarding']],
  ])('%s', (_name, value, expected, reasons) => {
    const problems: Problem[] = [];
    const annotations = value === undefined ? {} : { [FORWARDING_ANNOTATION]: value };
    expect(chooseForwarding('ns1/web', annotations, problems)).toBe(expected);
    expect(problems.map((p) => p.reason)).toEqual(reasons);
    for (const p of problems) {
      expect(p.service).toBe('ns1/web');
      expect(p.message).toContain(FORWARDING_ANNOTATION);
      expect(p.message).toContain('masq, tunnel');
    }
  });

  it('no annotations at all: masq', () => {
    const problems: Problem[] = [];
    expect(chooseForwarding('ns1/web', undefined, problems)).toBe('masq');
    expect(problems).toEqual([]);
  });

  it.each<[VipKind, boolean]>([['cluster-ip', false], ['node-port', false], ['external-ip', true], ['load-balancer', true]])(
    '%s tunnelled: %s', (kind, expected) => expect(tunnelledKind(kind)).toBe(expected));
});

describe('the desired table and sets of a tunnel Service', () => {
  it.each<[string, V1Service, V1EndpointSlice[], string, string[], string[]]>([
    ['unannotated: everything masqueraded, external traffic marked for masquerading (not in *-LOCAL)',
      exposed(), [pods()], MASQ_TABLE, [], []],
    ['masq: the same', exposed('masq'), [pods()], MASQ_TABLE, [], []],
    ['tunnel: external and LB IPs tunnelled and in the *-LOCAL sets (never masqueraded), ClusterIP and NodePort masqueraded',
      exposed('tunnel'), [pods()], TUNNEL_TABLE, [],
      ['KUBE-EXTERNAL-IP-LOCAL IPv4 TCP 203.0.113.7:80', 'KUBE-LOAD-BALANCER-LOCAL IPv4 TCP 203.0.113.8:80']],
    ['an unknown value: served masqueraded, with a problem', exposed('direct'), [pods()], MASQ_TABLE, ['InvalidForwarding'], []],
    ['tunnel, endpoints on another port than the Service\'s (IPVS tunnelling keeps the port): masqueraded, with a problem',
      exposed('tunnel'), [pods(8080)], MASQ_TABLE.replace(/:80 w=1/g, ':8080 w=1'), ['TunnelUnsupported'], []],
    ['tunnel without external or LB IPs: nothing to tunnel, a problem says so',
      exposed('tunnel', (s) => { s.spec!.type = 'NodePort'; delete s.spec!.externalIPs; delete s.status; }), [pods()],
      MASQ_TABLE.split('\n').filter((l) => !l.includes('203.0.113')).join('\n'), ['IneffectiveForwarding'], []],
    ['tunnel with externalTrafficPolicy Local: local endpoints only, tunnelled; the sets list each once',
      exposed('tunnel', (s) => { s.spec!.externalTrafficPolicy = 'Local'; s.spec!.healthCheckNodePort = 31000; }), [pods()],
      TUNNEL_TABLE.split('\n').filter((l) => !(l.includes('10.10.2.3') && !l.includes('10.200.1.10'))).join('\n'), [],
      ['KUBE-EXTERNAL-IP-LOCAL IPv4 TCP 203.0.113.7:80', 'KUBE-LOAD-BALANCER-LOCAL IPv4 TCP 203.0.113.8:80',
        'KUBE-NODE-PORT-LOCAL-TCP IPv4 TCP 30080']],
    ['tunnel with no endpoints: empty virtual servers, still exempt from masquerading',
      exposed('tunnel'), [], MASQ_TABLE.split('\n').filter((l) => l.startsWith('add-service')).join('\n'), [],
      ['KUBE-EXTERNAL-IP-LOCAL IPv4 TCP 203.0.113.7:80', 'KUBE-LOAD-BALANCER-LOCAL IPv4 TCP 203.0.113.8:80']],
  ])('%s', (_name, svc, slices, table, reasons, local) => {
    const d = build([svc], slices);
    expect(render(d.table)).toBe(table);
    expect(d.problems.map((p) => p.reason)).toEqual(reasons);
    expect(localSets(d.sets)).toEqual(local);
  });

  it('the port problem is reported once per Service port, naming the port', () => {
    const d = build([exposed('tunnel')], [pods(8080)]);
    expect(d.problems).toEqual([{ service: 'ns1/web', reason: 'TunnelUnsupported', message: expect.stringContaining('port "http"') }]);
  });

  it('dual-stack: the IPv6 external IP is tunnelled too', () => {
    const svc = exposed('tunnel', (s) => {
      s.spec!.type = 'ClusterIP'; delete s.spec!.ports![0]!.nodePort; delete s.status;
      s.spec!.clusterIPs = ['10.200.1.10', 'fd00:200::10']; s.spec!.ipFamilies = ['IPv4', 'IPv6'];
      s.spec!.externalIPs = ['203.0.113.7', '2001:db8::7'];
    });
    const v6 = makeSlice('ns1', 'web', 'web-6', [{ ip: 'fd00:10::2' }], (sl) => { sl.ports![0]!.port = 80; });
    const d = build([svc], [makeSlice('ns1', 'web', 'web-4', [{ ip: '10.10.1.2' }], (sl) => { sl.ports![0]!.port = 80; }), v6]);
    expect(render(d.table)).toBe([
      'add-service TCP 10.200.1.10:80 rr',
      'add-dest TCP 10.200.1.10:80 -> 10.10.1.2:80 w=1 masq',
      'add-service TCP 203.0.113.7:80 rr',
      'add-dest TCP 203.0.113.7:80 -> 10.10.1.2:80 w=1 tunnel tun=ipip',
      'add-service TCP [2001:db8::7]:80 rr',
      'add-dest TCP [2001:db8::7]:80 -> [fd00:10::2]:80 w=1 tunnel tun=ipip',
      'add-service TCP [fd00:200::10]:80 rr',
      'add-dest TCP [fd00:200::10]:80 -> [fd00:10::2]:80 w=1 masq',
    ].join('\n'));
    expect(localSets(d.sets)).toEqual(['KUBE-EXTERNAL-IP-LOCAL IPv4 TCP 203.0.113.7:80', 'KUBE-EXTERNAL-IP-LOCAL IPv6 TCP [2001:db8::7]:80']);
  });

  it('a bad annotation on one Service leaves the others alone', () => {
    const other = makeService('ns1', 'api', (s) => {
      s.spec!.clusterIP = '10.200.1.11'; s.spec!.clusterIPs = ['10.200.1.11']; s.spec!.externalIPs = ['203.0.113.9'];
      s.metadata!.annotations = { [FORWARDING_ANNOTATION]: 'tunnel' };
    });
    const apiPods = makeSlice('ns1', 'api', 'api-1', [{ ip: '10.10.1.5' }], (sl) => { sl.ports![0]!.port = 80; });
    const d = build([exposed('bogus'), other], [pods(), apiPods]);
    expect(d.problems.map((p) => `${p.service} ${p.reason}`)).toEqual(['ns1/web InvalidForwarding']);
    expect(render(d.table)).toContain('add-dest TCP 203.0.113.9:80 -> 10.10.1.5:80 w=1 tunnel tun=ipip');
    expect(render(d.table)).toContain('add-dest TCP 203.0.113.7:80 -> 10.10.1.2:80 w=1 masq');
  });

  it('the ipset payload lists the tunnelled addresses in the sets the EXTERNAL chain returns on; the rules do not change', () => {
    const masq = build([exposed()], [pods()]);
    const tunnel = build([exposed('tunnel')], [pods()]);
    expect(renderIpsets(tunnel, { families: ['IPv4'] })).toContain('add IPVSOP-EXTERNAL-IP-LOCAL-tmp 203.0.113.7,tcp:80\n');
    expect(renderIpsets(tunnel, { families: ['IPv4'] })).toContain('add IPVSOP-LB-LOCAL-tmp 203.0.113.8,tcp:80\n');
    expect(renderIpsets(masq, { families: ['IPv4'] })).not.toContain('LOCAL-tmp 203.0.113');
    // The rule that keeps them from being marked (render.ts): the same text with or without tunnels.
    expect(renderIptables(defaultProxyConfig).v4).toContain('-A IPVSOP-EXTERNAL -m set --match-set IPVSOP-EXTERNAL-IP-LOCAL dst,dst -j RETURN');
  });
});

describe('planning and applying a switch between masq and tunnel', () => {
  const owns = makeOwnership({ assignedAddresses: ['10.200.1.10', '203.0.113.7', '203.0.113.8'], recorded: new Set(['TCP 192.168.0.10:30080']) });
  const plan = (desired: ReturnType<typeof build>, fake: FakeIpvs) =>
    planIpvs({ desired: desired.table, actual: fake.view(), owns, now: 0, draining: new Map(), gracePeriodMs: 900_000 }).ops;

  it('masq -> tunnel is one update-dest per tunnelled real server (SET_DEST keeps the virtual server and its connections); back again the same', async () => {
    const fake = new FakeIpvs().seed(MASQ_TABLE);
    const toTunnel = plan(build([exposed('tunnel')], [pods()]), fake);
    expect(toTunnel.map(formatOp)).toEqual([
      'update-dest TCP 203.0.113.7:80 -> 10.10.1.2:80 w=1 tunnel tun=ipip',
      'update-dest TCP 203.0.113.7:80 -> 10.10.2.3:80 w=1 tunnel tun=ipip',
      'update-dest TCP 203.0.113.8:80 -> 10.10.1.2:80 w=1 tunnel tun=ipip',
      'update-dest TCP 203.0.113.8:80 -> 10.10.2.3:80 w=1 tunnel tun=ipip',
    ]);
    expect((await fake.apply(toTunnel)).filter((r) => r !== undefined)).toEqual([]);
    expect(fake.dump()).toBe(TUNNEL_TABLE);
    expect(plan(build([exposed('tunnel')], [pods()]), fake)).toEqual([]);
    const back = plan(build([exposed()], [pods()]), fake);
    expect(back.map(formatOp)).toEqual(toTunnel.map((op) => formatOp(op).replace('tunnel tun=ipip', 'masq')));
    expect((await fake.apply(back)).filter((r) => r !== undefined)).toEqual([]);
    expect(fake.dump()).toBe(MASQ_TABLE);
  });

  it('from an empty table: add-dest ops FakeIpvs accepts, as the kernel does (validate.ts)', async () => {
    const fake = new FakeIpvs();
    const ops = plan(build([exposed('tunnel')], [pods()]), fake);
    expect(ops.map(formatOp)).toContain('add-dest TCP 203.0.113.7:80 -> 10.10.1.2:80 w=1 tunnel tun=ipip');
    expect((await fake.apply(ops)).filter((r) => r !== undefined)).toEqual([]);
    expect(fake.dump()).toBe(TUNNEL_TABLE);
  });

  it('DesiredState: turning the annotation on changes only the external and LB virtual servers', () => {
    const state = new DesiredState(defaultProxyConfig, registry, NODE);
    state.setNode(makeNode());
    state.setService(exposed());
    state.setSlice(pods());
    state.sync();
    const svc = exposed('tunnel');
    svc.metadata!.resourceVersion = '2';
    state.setService(svc);
    expect([...state.sync().changed].sort()).toEqual(['TCP 203.0.113.7:80', 'TCP 203.0.113.8:80']);
    expect(state.desired().sets.filter((e) => e.set.endsWith('-LOCAL')).map(formatSetEntry))
      .toEqual(['KUBE-EXTERNAL-IP-LOCAL IPv4 TCP 203.0.113.7:80', 'KUBE-LOAD-BALANCER-LOCAL IPv4 TCP 203.0.113.8:80']);
  });
});
