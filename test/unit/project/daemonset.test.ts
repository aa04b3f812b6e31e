// The DaemonSet against the code it runs: its args parsed by the CLI's own parser (COMMANDS, as
// main() does: node:util parseArgs, strict), its probes against the operator's real HTTP server,
// and the security settings the README promises (no privileged mode, NET_ADMIN + NET_RAW only).
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { describe, expect, it } from '@jest/globals';
import type { V1Container, V1DaemonSet, V1PodSpec } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { COMMANDS } from '../../../src/cli/main.js';
import { serveHttp } from '../../../src/healthcheck/http.js';
import { Metrics } from '../../../src/metrics/metrics.js';
import { DEFAULT_STATE_DIR } from '../../../src/sync/record.js';
import { defaultProxyConfig } from '../../../src/config/types.js';

const ds = parse(readFileSync('manifests/daemonset.yaml', 'utf8')) as V1DaemonSet;
const pod = ds.spec!.template.spec as V1PodSpec;
const container = pod.containers[0] as V1Container;
const args = container.args ?? [];

/** The container's args as main() parses them: the command, then its flags (strict). */
function parseContainerArgs() {
  const [name, ...rest] = args;
  const cmd = COMMANDS[name ?? ''];
  if (!cmd) throw new Error(`unknown command ${JSON.stringify(name)}`);
  const { values, positionals } = parseArgs({ args: rest, options: cmd.options, strict: true, allowPositionals: true });
  return { name, values: values as Record<string, string | boolean | undefined>, positionals, cmd };
}

const port = (addr: string) => Number(addr.slice(addr.lastIndexOf(':') + 1));

describe('the DaemonSet runs the CLI with flags it has', () => {
  it('parses with the CLI\'s own parser: `run`, strict, no positionals', () => {
    expect(container.command).toEqual(['ipvs-operator']);
    const { name, values, positionals, cmd } = parseContainerArgs();
    expect(name).toBe('run');
    expect(positionals).toHaveLength(cmd.positionals ?? 0);
    expect(values).toMatchObject({ source: 'kube', 'dry-run': false, 'no-iptables': false, 'log-format': 'json', 'log-level': 'info' });
  });

  it('a flag the CLI does not have would be refused by the same parse (the check has teeth)', () => {
    expect(() => parseArgs({ args: ['--metrics-adr=1'], options: COMMANDS.run!.options, strict: true, allowPositionals: true })).toThrow(/metrics-adr/);
  });

  it('the node name is the downward API\'s spec.nodeName, and every $(VAR) in args is an env var of the container', () => {
    const env = new Map((container.env ?? []).map((e) => [e.name, e]));
    expect(env.get('NODE_NAME')?.valueFrom?.fieldRef?.fieldPath).toBe('spec.nodeName');
    expect(parseContainerArgs().values['node-name']).toBe('$(NODE_NAME)');
    const refs = args.flatMap((a) => [...a.matchAll(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g)].map((m) => m[1]!));
    expect(refs.filter((r) => !env.has(r))).toEqual([]);
  });

  it('the probes, the container port and --metrics-addr are one port, off kube-proxy\'s 10249/10256', () => {
    const metrics = String(parseContainerArgs().values['metrics-addr']);
    const p = port(metrics);
    expect(container.ports?.[0]).toEqual({ name: 'http-metrics', containerPort: p, protocol: 'TCP' });
    expect(container.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: p });
    expect(container.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: p });
    expect([10248, 10249, 10250, 10256, 10257, 10259]).not.toContain(p);
  });

  it('declares the proxy health port of healthzBindAddress\'s default (kube-proxy\'s 10256), no other', () => {
    expect(container.ports?.slice(1)).toEqual([{ name: 'proxy-healthz', containerPort: port(defaultProxyConfig.healthzBindAddress), protocol: 'TCP' }]);
    expect(port(defaultProxyConfig.healthzBindAddress)).toBe(10256);
  });

  it('the probe paths are served by the operator: 200 when healthy and synced, 503 before the first sync', async () => {
    let ready = false;
    const server = await serveHttp('127.0.0.1:0', () => ({ healthy: true, ready, reason: '' }), new Metrics());
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const code = async (path: string) => (await fetch(`${base}${path}`)).status;
      const live = container.livenessProbe!.httpGet!.path!;
      const readyPath = container.readinessProbe!.httpGet!.path!;
      expect([await code(live), await code(readyPath)]).toEqual([200, 503]);
      ready = true;
      expect(await code(readyPath)).toBe(200);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});

describe('the DaemonSet\'s pod', () => {
  it('is on the host network, node-critical, on every node whatever its taints', () => {
    expect(pod.hostNetwork).toBe(true);
    expect(pod.dnsPolicy).toBe('ClusterFirstWithHostNet');
    expect(pod.priorityClassName).toBe('system-node-critical');
    expect(pod.tolerations).toEqual([{ operator: 'Exists' }]);
    expect(ds.spec?.updateStrategy?.type).toBe('RollingUpdate');
  });

  it('is not privileged: every capability dropped but NET_ADMIN and NET_RAW, no escalation, read-only root', () => {
    const sc = container.securityContext!;
    expect(sc.privileged).not.toBe(true);
    expect(sc.capabilities).toEqual({ drop: ['ALL'], add: ['NET_ADMIN', 'NET_RAW'] });
    expect(sc.allowPrivilegeEscalation).toBe(false);
    expect(sc.readOnlyRootFilesystem).toBe(true);
    expect(pod.hostPID).toBeFalsy();
    expect(pod.hostIPC).toBeFalsy();
    expect(pod.initContainers ?? []).toEqual([]);
  });

  it('mounts /lib/modules read-only, the node\'s xtables lock, its state directory for the ownership record, and a small writable /tmp', () => {
    const vols = new Map((pod.volumes ?? []).map((v) => [v.name, v]));
    const mounts = new Map((container.volumeMounts ?? []).map((m) => [m.mountPath, m]));
    const modules = mounts.get('/lib/modules');
    expect(modules?.readOnly).toBe(true);
    expect(vols.get(modules!.name)?.hostPath).toEqual({ path: '/lib/modules', type: 'Directory' });
    const lock = mounts.get('/run/xtables.lock');
    expect(lock?.readOnly).toBeFalsy();
    expect(vols.get(lock!.name)?.hostPath).toEqual({ path: '/run/xtables.lock', type: 'FileOrCreate' });
    expect(vols.get(mounts.get('/tmp')!.name)?.emptyDir).toBeDefined();
    // The record lives where `run` keeps it by default (--state-dir).
    const state = mounts.get(DEFAULT_STATE_DIR);
    expect(vols.get(state!.name)?.hostPath).toEqual({ path: DEFAULT_STATE_DIR, type: 'DirectoryOrCreate' });
    // Nothing else of the host: the three hostPath volumes above are all.
    expect([...vols.values()].filter((v) => v.hostPath).map((v) => v.hostPath!.path).sort()).toEqual(['/lib/modules', '/run/ipvs-operator', '/run/xtables.lock']);
  });

  it('has resource requests and limits', () => {
    expect(container.resources?.requests).toEqual(expect.objectContaining({ cpu: expect.any(String), memory: expect.any(String) }));
    expect(container.resources?.limits).toEqual(expect.objectContaining({ cpu: expect.any(String), memory: expect.any(String) }));
  });

  it('selects its own pods', () => {
    expect(ds.spec?.template.metadata?.labels).toEqual(expect.objectContaining(ds.spec?.selector.matchLabels ?? { missing: 'matchLabels' }));
  });
});

describe('the node-setup component (manifests/components/node-setup, examples/node-setup)', () => {
  interface Op { op: string; path: string; value: unknown }
  const component = parse(readFileSync('manifests/components/node-setup/Kustomization', 'utf8')) as {
    apiVersion: string; kind: string; patches: Array<{ target: Record<string, string>; patch: string }>;
  };
  const overlay = parse(readFileSync('examples/node-setup/Kustomization', 'utf8')) as { resources: string[]; components: string[] };
  /** The component's JSON 6902 patch applied to the DaemonSet (an `add` of a new field is all it uses). */
  function patched(): V1PodSpec {
    const out = structuredClone(ds);
    for (const op of parse(component.patches[0]!.patch) as Op[]) {
      expect(op.op).toBe('add');
      const keys = op.path.split('/').slice(1);
      let at = out as unknown as Record<string, unknown>;
      for (const k of keys.slice(0, -1)) at = at[k] as Record<string, unknown>;
      expect(at[keys.at(-1)!]).toBeUndefined(); // adds, never replaces
      at[keys.at(-1)!] = op.value;
    }
    return out.spec!.template.spec as V1PodSpec;
  }

  it('is a Component that targets the DaemonSet, and the overlay uses it on manifests/', () => {
    expect(component).toMatchObject({ apiVersion: 'kustomize.config.k8s.io/v1alpha1', kind: 'Component' });
    expect(component.patches[0]!.target).toEqual({ group: 'apps', version: 'v1', kind: 'DaemonSet', name: ds.metadata!.name });
    expect(overlay).toMatchObject({ resources: ['../../manifests'], components: ['../../manifests/components/node-setup'] });
  });

  it('adds one privileged init container running `node-setup` from the operator image, with the pod\'s own volumes', () => {
    const spec = patched();
    expect(spec.initContainers).toHaveLength(1);
    const init = spec.initContainers![0]!;
    expect(init.image).toBe(container.image);
    expect(init.command).toEqual(container.command);
    expect(init.securityContext?.privileged).toBe(true);
    const [name, ...rest] = init.args ?? [];
    expect(name).toBe('node-setup');
    const cmd = COMMANDS['node-setup']!;
    const { values } = parseArgs({ args: rest, options: cmd.options, strict: true, allowPositionals: false });
    expect(values).toMatchObject({ 'strict-arp': false, 'state-dir': DEFAULT_STATE_DIR });
    const volumes = new Set(spec.volumes!.map((v) => v.name));
    for (const m of init.volumeMounts!) expect(volumes.has(m.name)).toBe(true);
    expect(init.volumeMounts!.find((m) => m.name === 'lib-modules')).toMatchObject({ mountPath: '/lib/modules', readOnly: true });
    expect(init.volumeMounts!.find((m) => m.name === 'state')?.mountPath).toBe(DEFAULT_STATE_DIR);
    // The operator container itself stays unprivileged.
    expect(spec.containers[0]!.securityContext?.privileged).toBe(false);
  });
});
