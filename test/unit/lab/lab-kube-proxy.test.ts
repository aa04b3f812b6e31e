// The lab cluster's kube-proxy (iptables mode, following the API): which Service ports it takes
// from the listed objects, and the whole-table payload of one sync (stale chains deleted in the
// same transaction). The chains it writes run in the cluster scenario "beside kube-proxy".
import { describe, expect, it } from '@jest/globals';
import { renderKubeProxyRestore, renderKubeProxyTable, renderKubeProxyTableTeardown, serviceChains } from '../../../lab/compare/kube-proxy.js';
import { kubeProxyServices } from '../../../lab/cluster/kube-proxy.js';

const svc = (name: string, clusterIP: string, extra: { labels?: Record<string, string>; spec?: Record<string, unknown> } = {}) => ({
  metadata: { name, namespace: 'default', ...(extra.labels ? { labels: extra.labels } : {}) },
  spec: { clusterIP, ports: [{ name: 'http', port: 80, protocol: 'TCP' }], ...extra.spec },
});
const slice = (service: string, eps: Array<[string, boolean]>, port = 80, addressType = 'IPv4') => ({
  metadata: { namespace: 'default', labels: { 'kubernetes.io/service-name': service } },
  addressType,
  endpoints: eps.map(([ip, ready]) => ({ addresses: [ip], conditions: { ready } })),
  ports: [{ name: 'http', port, protocol: 'TCP' }],
});

describe('kubeProxyServices', () => {
  it('takes the unlabelled IPv4 TCP ClusterIP ports with their ready endpoints, sorted as "ip:port" text', () => {
    const out = kubeProxyServices(
      [svc('webpod', '10.200.1.10')],
      [slice('webpod', [['10.10.3.2', true], ['10.10.1.2', true], ['10.10.2.2', false]]), slice('webpod', [['10.10.10.2', true]])],
      '10.10.0.0/16',
    );
    expect(out).toEqual([{
      namespace: 'default', name: 'webpod', portName: 'http', clusterIP: '10.200.1.10', port: 80, clusterCIDR: '10.10.0.0/16',
      endpoints: [{ ip: '10.10.1.2', port: 80 }, { ip: '10.10.10.2', port: 80 }, { ip: '10.10.3.2', port: 80 }],
    }]);
  });

  it('leaves what kube-proxy does not own or this stand-in does not do: labelled, headless, None, IPv6, UDP', () => {
    const out = kubeProxyServices([
      svc('mine', '10.200.1.36', { labels: { 'service.kubernetes.io/service-proxy-name': 'ipvs-operator' } }),
      svc('headless-label', '10.200.1.37', { labels: { 'service.kubernetes.io/headless': '' } }),
      svc('headless', 'None'),
      svc('v6', 'fd00:10:96::10'),
      svc('dns', '10.200.1.53', { spec: { ports: [{ name: 'dns', port: 53, protocol: 'UDP' }] } }),
      { metadata: {}, spec: {} },
    ], [slice('mine', [['10.10.1.2', true]]), slice('webpod', [['fd00::2', true]], 80, 'IPv6')], '10.10.0.0/16');
    expect(out).toEqual([]);
  });

  it('sessionAffinity ClientIP: its timeout, kube-proxy\'s 10800 s when none is given; an IPv6 slice is not used', () => {
    const out = kubeProxyServices([
      svc('a', '10.200.1.33', { spec: { sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 30 } } } }),
      svc('b', '10.200.1.34', { spec: { sessionAffinity: 'ClientIP' } }),
    ], [slice('a', [['fd00::2', true]], 80, 'IPv6')], '10.10.0.0/16');
    expect(out.map((s) => [s.name, s.affinitySeconds, s.endpoints.length])).toEqual([['a', 30, 0], ['b', 10800, 0]]);
  });
});

describe('renderKubeProxyTable', () => {
  const a = kubeProxyServices([svc('webpod', '10.200.1.10')], [slice('webpod', [['10.10.1.2', true], ['10.10.2.2', true]])], '10.10.0.0/16');
  const b = kubeProxyServices([svc('webpod', '10.200.1.10')], [slice('webpod', [['10.10.1.2', true]])], '10.10.0.0/16');

  it('one Service: the per-Service payload\'s chains and rules, without the jumps (ensured outside the restore)', () => {
    const { payload, chains } = renderKubeProxyTable(a);
    const single = renderKubeProxyRestore(a[0]!).split('\n').filter((l) => !l.startsWith('-I '));
    expect(payload.split('\n')).toEqual(single);
    expect(chains).toEqual(['KUBE-SERVICES', 'KUBE-POSTROUTING', 'KUBE-MARK-MASQ', serviceChains(a[0]!).svc, ...serviceChains(a[0]!).seps]);
  });

  it('an endpoint gone: its KUBE-SEP chain is declared (flushed) and deleted in the same restore', () => {
    const first = renderKubeProxyTable(a);
    const gone = serviceChains(a[0]!).seps[1]!;
    const second = renderKubeProxyTable(b, first.chains);
    expect(second.chains).not.toContain(gone);
    const lines = second.payload.split('\n');
    expect(lines).toContain(`:${gone} - [0:0]`);
    expect(lines.filter((l) => l.startsWith('-X '))).toEqual([`-X ${gone}`]);
    const lastRule = lines.map((l, i) => (l.startsWith('-A ') ? i : -1)).reduce((m, i) => Math.max(m, i), -1);
    expect(lines.indexOf(`-X ${gone}`)).toBeGreaterThan(lastRule);
    expect(second.payload).not.toContain(`-j ${gone}`);
  });

  it('no Services: only the base chains; the teardown removes jumps and every chain given', () => {
    expect(renderKubeProxyTable([]).payload).toContain('-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000');
    const down = renderKubeProxyTableTeardown(['KUBE-SERVICES', 'KUBE-SVC-X']).split('\n');
    expect(down).toEqual(['*nat',
      '-D PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
      '-D OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
      '-D POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
      '-F KUBE-SERVICES', '-F KUBE-SVC-X', '-X KUBE-SERVICES', '-X KUBE-SVC-X', 'COMMIT', '']);
  });
});
