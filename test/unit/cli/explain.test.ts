// `explain`: chain names must be kube-proxy's own. The expected names are copied from the study
// notes' iptables-save of a real cluster (../shared/notes/kans-service-lab-iptables.md):
// Service default/svc-clusterip port svc-webport 10.200.1.63:9000 -> 10.10.1.3:80, 10.10.2.4:80, 10.10.3.3:80.
import { describe, expect, it } from '@jest/globals';
import { renderExplain } from '../../../src/cli/explain.js';
import { kubeProxyChain } from '../../../src/iptables/kube-proxy-names.js';
import { makeRealServer, makeVirtualServer } from '../../../src/model/ipvs.js';

describe('explain', () => {
  it('names chains exactly as kube-proxy does', () => {
    expect(kubeProxyChain('KUBE-SVC-', 'default/svc-clusterip:svc-webport', 'TCP')).toBe('KUBE-SVC-KBDEBIL6IU6WL7RF');
    expect(kubeProxyChain('KUBE-SEP-', 'default/svc-clusterip:svc-webport', 'TCP', '10.10.1.3:80')).toBe('KUBE-SEP-2WDU4O4C4SDCYWRE');
    expect(kubeProxyChain('KUBE-SEP-', 'default/svc-clusterip:svc-webport', 'TCP', '10.10.2.4:80')).toBe('KUBE-SEP-W5ROWLZT7Z7YVFGJ');
    expect(kubeProxyChain('KUBE-SEP-', 'default/svc-clusterip:svc-webport', 'TCP', '10.10.3.3:80')).toBe('KUBE-SEP-K7ALM6KJRBAYOHKX');
  });

  it('shows the IPVS entry beside the statistic-random chain 1/3, 1/2, rest', () => {
    const vs = makeVirtualServer({ family: 'IPv4', address: '10.200.1.63', port: 9000, scheduler: 'lc' });
    const dests = ['10.10.1.3', '10.10.2.4', '10.10.3.3'].map((a) => makeRealServer({ address: a, port: 80 }));
    const text = renderExplain('default/svc-clusterip', [{
      vs, dests, origin: { namespace: 'default', name: 'svc-clusterip', portName: 'svc-webport', kind: 'cluster-ip', plugin: 'lc' },
    }]);
    expect(text).toContain('TCP 10.200.1.63:9000 lc');
    expect(text).toContain('-A KUBE-SERVICES -d 10.200.1.63/32 -p tcp -m tcp --dport 9000 -j KUBE-SVC-KBDEBIL6IU6WL7RF');
    expect(text).toContain('-A KUBE-SVC-KBDEBIL6IU6WL7RF -m statistic --mode random --probability 0.3333333333 -j KUBE-SEP-2WDU4O4C4SDCYWRE');
    expect(text).toContain('-A KUBE-SVC-KBDEBIL6IU6WL7RF -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-W5ROWLZT7Z7YVFGJ');
    expect(text).toContain('-A KUBE-SVC-KBDEBIL6IU6WL7RF -j KUBE-SEP-K7ALM6KJRBAYOHKX');
    expect(text).toContain('-A KUBE-SEP-K7ALM6KJRBAYOHKX -p tcp -m tcp -j DNAT --to-destination 10.10.3.3:80');
    expect(text).toContain('fewest connections');
  });
});
