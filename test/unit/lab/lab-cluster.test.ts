// The lab cluster's pure parts: the network plan (lab/cluster/nodes.ts) and how the
// DaemonSet's container becomes a node process (lab/cluster/daemonset.ts), against the real
// manifests/daemonset.yaml.
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { containerScript, expandVars, launchFromDaemonSet, quantityBytes, type PodFacts } from '../../../lab/cluster/daemonset.js';
import { freePodIndex, nodeLines, nodeName, planNodes, planPod, podLines, podNodeLines, podVeth } from '../../../lab/cluster/nodes.js';

const DS = parse(readFileSync(new URL('../../../../manifests/daemonset.yaml', import.meta.url), 'utf8')) as unknown;
const POD: PodFacts = {
  nodeName: 'myk8s-worker2', podName: 'ipvs-operator-x', namespace: 'ipvs-operator', podIP: '172.18.0.4',
  serviceAccountName: 'ipvs-operator', apiHost: '172.18.0.2', apiPort: 6443,
};

describe('lab cluster network plan', () => {
  it('names nodes as kind does and gives each a bridge address and a /24 pod CIDR', () => {
    expect([0, 1, 2, 3].map((i) => nodeName(i))).toEqual(['myk8s-control-plane', 'myk8s-worker', 'myk8s-worker2', 'myk8s-worker3']);
    const nodes = planNodes(4);
    expect(nodes.map((n) => [n.name, n.role, n.ipv4, n.ipv6, n.podCIDR, n.podGateway])).toEqual([
      ['myk8s-control-plane', 'control-plane', '172.18.0.2', 'fc00:f853:ccd:e793::2', '10.10.0.0/24', '10.10.0.1'],
      ['myk8s-worker', 'worker', '172.18.0.3', 'fc00:f853:ccd:e793::3', '10.10.1.0/24', '10.10.1.1'],
      ['myk8s-worker2', 'worker', '172.18.0.4', 'fc00:f853:ccd:e793::4', '10.10.2.0/24', '10.10.2.1'],
      ['myk8s-worker3', 'worker', '172.18.0.5', 'fc00:f853:ccd:e793::5', '10.10.3.0/24', '10.10.3.1'],
    ]);
  });

  it.each([0, -1, 1.5, 91, Number.NaN])('refuses %p nodes with a clear error', (n) => {
    expect(() => planNodes(n)).toThrow(/--nodes must be an integer from 1 to 90/);
  });

  it('routes every other node\'s pod CIDRs (both families) via that node\'s bridge address, never its own', () => {
    const nodes = planNodes(3);
    const lines = nodeLines(nodes[1]!, nodes);
    expect(lines.filter((l) => l.includes(' via 172.18.0.') && !l.includes('default'))).toEqual([
      'route add 10.10.0.0/24 via 172.18.0.2 dev eth0', 'route add 10.10.2.0/24 via 172.18.0.4 dev eth0',
    ]);
    expect(lines).toContain('route add fd00:10:10:2::/64 via fc00:f853:ccd:e793::4 dev eth0');
    expect(lines.join('\n')).not.toContain('10.10.1.0/24');
  });

  it('wires a pod ptp-style: a /32 and /128, routes on the node to its veth, default via the node gateway', () => {
    const n = planNodes(2)[1]!;
    const p = planPod('webpod-1', n, 2);
    expect(p).toMatchObject({ ipv4: '10.10.1.2', ipv6: 'fd00:10:10:1::2', hostVeth: podVeth('webpod-1') });
    expect(p.hostVeth).toMatch(/^veth[0-9a-f]{8}$/);
    expect(planPod('a', n, 17).ipv6).toBe('fd00:10:10:1::11');
    expect(podNodeLines(p, n)).toEqual(expect.arrayContaining([`addr add 10.10.1.1/32 dev ${p.hostVeth}`, `route add 10.10.1.2/32 dev ${p.hostVeth}`]));
    expect(podLines(p, n)).toEqual(expect.arrayContaining(['addr add 10.10.1.2/32 dev eth0', 'route add default via 10.10.1.1 dev eth0', 'route add ::/0 via fe80::1 dev eth0']));
  });

  it.each([['Webpod'], ['-x'], ['a'.repeat(64)], ['a_b']])('refuses the pod name %p', (name) => {
    expect(() => planPod(name, planNodes(1)[0]!, 2)).toThrow(/bad pod name/);
  });

  it('takes the lowest free pod index and says when a node is full', () => {
    expect(freePodIndex(new Set())).toBe(2);
    expect(freePodIndex(new Set([2, 3, 5]))).toBe(4);
    const full = new Set(Array.from({ length: 253 }, (_, i) => i + 2));
    expect(() => planPod('x', planNodes(1)[0]!, freePodIndex(full))).toThrow(/no pod address left/);
  });
});

describe('the DaemonSet container as a lab node process', () => {
  it('expands $(VAR) as the kubelet does', () => {
    const env = { NODE_NAME: 'n1', A: 'x' };
    expect(expandVars('--node-name=$(NODE_NAME)', env)).toBe('--node-name=n1');
    expect(expandVars('$$(NODE_NAME) $(MISSING) $(A)$(A)', env)).toBe('$(NODE_NAME) $(MISSING) xx');
  });

  it('builds argv, env, volumes and capabilities from manifests/daemonset.yaml', () => {
    const l = launchFromDaemonSet(DS, POD);
    expect(l.argv).toEqual(['ipvs-operator', 'run', '--source=kube', '--node-name=myk8s-worker2', '--metrics-addr=0.0.0.0:10262', '--log-format=json', '--log-level=info']);
    expect(l.env).toEqual({ KUBERNETES_SERVICE_HOST: '172.18.0.2', KUBERNETES_SERVICE_PORT: '6443', KUBERNETES_SERVICE_PORT_HTTPS: '6443', NODE_NAME: 'myk8s-worker2', POD_NAMESPACE: 'ipvs-operator' });
    expect(l.capabilities).toEqual(['net_admin', 'net_raw']);
    expect(l.hostPaths.map((h) => [h.hostPath, h.mountPath, h.readOnly])).toEqual([
      ['/lib/modules', '/lib/modules', true], ['/run/xtables.lock', '/run/xtables.lock', false], ['/run/ipvs-operator', '/run/ipvs-operator', false],
    ]);
    expect(l.emptyDirs).toEqual([{ mountPath: '/tmp', sizeLimit: '16Mi' }]);
    expect([l.readyPort, l.readyPath, l.readOnlyRootFilesystem]).toEqual([10262, '/readyz', true]);
  });

  it('the node script mounts the node\'s own hostPaths, /proc/sys read-only, and keeps only the two capabilities', () => {
    const script = containerScript(launchFromDaemonSet(DS, POD), { nodeRoot: '/run/lab-cluster/nodes/w2', program: ['/usr/bin/node', '/p/main.js'], serviceAccount: '/sa' });
    expect(script).toContain("mount --bind '/run/lab-cluster/nodes/w2/run/ipvs-operator' '/run/ipvs-operator'");
    expect(script).toContain("mount --bind '/lib/modules' '/lib/modules'\nmount -o remount,bind,ro '/lib/modules'");
    expect(script).toContain('mount -o remount,bind,ro /proc/sys');
    expect(script).toContain("mount --bind '/sa' /var/run/secrets/kubernetes.io/serviceaccount");
    expect(script).toMatch(/exec env .*NODE_NAME='myk8s-worker2'.* 'setpriv' '--bounding-set=-all,\+net_admin,\+net_raw' .*'\/usr\/bin\/node' '\/p\/main.js' 'run' '--source=kube'/);
  });

  it('keeps a working tree under the emptyDir\'s path (a checkout in /tmp) visible inside the tmpfs', () => {
    const l = launchFromDaemonSet(DS, POD);
    const script = containerScript(l, { nodeRoot: '/n', program: ['/usr/bin/node', '/tmp/ci/dist/main.js'], keep: ['/tmp/ci', '/work/p'] });
    const lines = script.split('\n');
    const tmpfs = lines.findIndex((x) => x.startsWith('mount -t tmpfs') && x.endsWith(" '/tmp'"));
    expect(lines.slice(tmpfs - 3, tmpfs + 3)).toEqual([
      "mkdir -p '/n/keep-0-0'", "mount --bind '/tmp/ci' '/n/keep-0-0'", "mkdir -p '/tmp'",
      "mount -t tmpfs -o mode=1777,size=16777216 emptydir '/tmp'",
      "mkdir -p '/tmp/ci'", "mount --bind '/n/keep-0-0' '/tmp/ci'",
    ]);
    expect(script).not.toContain('/work/p'); // not under /tmp: nothing to do
    // From an image the program is in the image: nothing of the node's is kept.
    expect(containerScript(l, { nodeRoot: '/n', program: [l.argv[0]!], image: { rootfs: '/img', dir: '/n/c' }, keep: ['/tmp/ci'] })).not.toContain('keep-');
  });

  it('runs the container from an image\'s filesystem: an overlay over it, every mount under it, the command found in it (chroot)', () => {
    const l = launchFromDaemonSet(DS, POD);
    const script = containerScript(l, { nodeRoot: '/n', program: [l.argv[0]!], serviceAccount: '/sa', image: { rootfs: '/img', dir: '/n/c' }, files: ['/n/kubeconfig'] });
    const lines = script.split('\n');
    const overlay = lines.indexOf("mount -t overlay overlay -o 'lowerdir=/img,upperdir=/n/c/upper,workdir=/n/c/work' '/n/c/root' || cp -a '/img/.' '/n/c/root'");
    expect(overlay).toBeGreaterThan(0);
    expect(lines.slice(overlay + 1, overlay + 4)).toEqual(["mount -t proc proc '/n/c/root/proc'", "mount --rbind /dev '/n/c/root/dev'", "mount --rbind /sys '/n/c/root/sys'"]);
    // Every mount after the overlay lands inside the container's root, never on the node's own
    // paths: its target is resolved in the root (symlinks followed there, as runc does), or is the
    // root's own /proc/sys.
    expect(lines).toContain("inroot() { printf '%s%s' '/n/c/root' \"$(chroot '/n/c/root' realpath -m -- \"$1\")\"; }");
    const targets = lines.filter((x) => x.startsWith('mount --bind ')).map((x) => x.replace(/^mount --bind ('[^']*'|\S+) /, ''));
    expect(targets.length).toBeGreaterThan(3);
    expect(targets.filter((t) => !/^"\$\(inroot '\/[^']*'\)"$/.test(t))).toEqual(["'/n/c/root/proc/sys'"]);
    expect(targets).toContain(`"$(inroot '/var/run/secrets/kubernetes.io/serviceaccount')"`);
    expect(script).toContain("mount -o remount,bind,ro '/n/c/root/proc/sys'");
    expect(script).toContain(`mount --bind '/n/kubeconfig' "$(inroot '/n/kubeconfig')"\nmount -o remount,bind,ro "$(inroot '/n/kubeconfig')"`);
    expect(lines.filter(Boolean).pop()).toMatch(/^exec 'chroot' '\/n\/c\/root' env .*NODE_NAME='myk8s-worker2'.* 'setpriv' .*'--no-new-privs' 'ipvs-operator' 'run' '--source=kube'/);
  });

  it.each([
    [{ kind: 'Deployment' }, /expected a DaemonSet/],
    [{ kind: 'DaemonSet', spec: { template: { spec: { hostNetwork: true, containers: [{}] } } } }, /no command/],
    [{ kind: 'DaemonSet', spec: { template: { spec: { containers: [{ command: ['x'] }] } } } }, /must use hostNetwork/],
    [{ kind: 'DaemonSet', spec: { template: { spec: { hostNetwork: true, containers: [{ command: ['x'], env: [{ name: 'X', valueFrom: { fieldRef: { fieldPath: 'status.phase' } } }] }] } } } }, /fieldRef status.phase is not supported/],
    [{ kind: 'DaemonSet', spec: { template: { spec: { hostNetwork: true, volumes: [{ name: 'v', configMap: {} }], containers: [{ command: ['x'], volumeMounts: [{ name: 'v', mountPath: '/v' }] }] } } } }, /neither hostPath nor emptyDir/],
  ])('refuses a DaemonSet the lab cannot run (%#)', (ds, message) => {
    expect(() => launchFromDaemonSet(ds, POD)).toThrow(message);
  });

  it.each([['16Mi', 16 * 1024 * 1024], ['1G', 1e9], ['512', 512]])('quantity %s is %d bytes', (q, n) => {
    expect(quantityBytes(q)).toBe(n);
  });

  it('refuses a bad quantity', () => {
    expect(() => quantityBytes('16 MB')).toThrow(/bad quantity/);
  });
});
