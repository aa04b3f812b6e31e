// kube-proxy's iptables mode on one lab node, following the API server: what kind's kube-proxy
// DaemonSet does beside the operator in the coexistence install (examples/coexist/). It lists
// Services and EndpointSlices, watches both, and on every change rewrites its nat chains with one
// `iptables-restore --noflush` (lab/compare/kube-proxy.ts renders them as kube-proxy's proxier
// does). Scope, as a lab stand-in and not kube-proxy: TCP ClusterIP ports of IPv4 Services without
// the service-proxy-name label (the ones kube-proxy owns), ready endpoints, sessionAffinity
// ClientIP; no NodePort, no IPv6, no traffic policies. It authenticates with the token it is
// given (the lab passes its admin token: the lab API server has no kube-proxy ServiceAccount).
// On SIGTERM it removes its jumps and chains (kube-proxy --cleanup) and exits.
//
//   ip netns exec <node> node dist/lab/cluster/kube-proxy.js --server https://172.18.0.2:6443 \
//     --ca ca.crt --token-file token --cluster-cidr 10.10.0.0/16
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { request as httpRequest, type IncomingMessage, type ClientRequest } from 'node:http';
import { parseArgs } from 'node:util';
import { isIPv4 } from 'node:net';
import { KubeClient } from '../../src/kube/client.js';
import { KUBE_PROXY_JUMPS, renderKubeProxyTable, renderKubeProxyTableTeardown, type KubeProxyService } from '../compare/kube-proxy.js';
import { SERVICE_PROXY_NAME_LABEL } from '../../src/desired/service-parse.js';

interface ServiceLite {
  metadata?: { name?: string; namespace?: string; labels?: Record<string, string> };
  spec?: {
    clusterIP?: string; sessionAffinity?: string; sessionAffinityConfig?: { clientIP?: { timeoutSeconds?: number } };
    ports?: Array<{ name?: string; port?: number; protocol?: string }>;
  };
}
interface SliceLite {
  metadata?: { namespace?: string; labels?: Record<string, string> };
  addressType?: string;
  endpoints?: Array<{ addresses?: string[]; conditions?: { ready?: boolean | null } }> | null;
  ports?: Array<{ name?: string | null; port?: number; protocol?: string }> | null;
}

const HEADLESS_LABEL = 'service.kubernetes.io/headless';
/** kube-proxy's default sessionAffinityConfig.clientIP.timeoutSeconds. */
const DEFAULT_AFFINITY_SECONDS = 10800;

/**
 * The Service ports kube-proxy's iptables mode programs here, from the listed objects: IPv4 TCP
 * ClusterIP ports of Services without the service-proxy-name or headless label, each with the
 * ready IPv4 endpoints of its EndpointSlices (matched by port name), sorted as kube-proxy sorts
 * them (by "ip:port" text). pure: no I/O.
 */
export function kubeProxyServices(services: readonly ServiceLite[], slices: readonly SliceLite[], clusterCIDR: string): KubeProxyService[] {
  const out: KubeProxyService[] = [];
  for (const s of services) {
    const ns = s.metadata?.namespace ?? 'default';
    const name = s.metadata?.name;
    const labels = s.metadata?.labels ?? {};
    const ip = s.spec?.clusterIP;
    if (!name || labels[SERVICE_PROXY_NAME_LABEL] !== undefined || labels[HEADLESS_LABEL] !== undefined) continue;
    if (!ip || !isIPv4(ip)) continue;
    const mine = slices.filter((sl) => (sl.metadata?.namespace ?? 'default') === ns && sl.metadata?.labels?.['kubernetes.io/service-name'] === name && sl.addressType === 'IPv4');
    const affinitySeconds = s.spec?.sessionAffinity === 'ClientIP' ? (s.spec.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? DEFAULT_AFFINITY_SECONDS) : undefined;
    for (const p of s.spec?.ports ?? []) {
      if ((p.protocol ?? 'TCP') !== 'TCP' || typeof p.port !== 'number') continue;
      const portName = p.name ?? '';
      const eps = new Map<string, { ip: string; port: number }>();
      for (const sl of mine) {
        const sp = (sl.ports ?? []).find((x) => (x.name ?? '') === portName && (x.protocol ?? 'TCP') === 'TCP');
        if (!sp || typeof sp.port !== 'number') continue;
        for (const e of sl.endpoints ?? []) {
          if (e.conditions?.ready === false) continue;
          const a = e.addresses?.[0];
          if (a && isIPv4(a)) eps.set(`${a}:${sp.port}`, { ip: a, port: sp.port });
        }
      }
      const endpoints = [...eps.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, e]) => e);
      out.push({ namespace: ns, name, portName, clusterIP: ip, port: p.port, endpoints, clusterCIDR, ...(affinitySeconds !== undefined ? { affinitySeconds } : {}) });
    }
  }
  return out;
}

function run(cmd: string, args: readonly string[], input?: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['pipe', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stderr }));
    // A child that exits before reading its input (iptables -C reads none; iptables-restore may
    // refuse at once) closes the pipe: the write then fails with EPIPE, which unhandled crashed
    // this process in a CI run. Its exit code and stderr say what happened.
    child.stdin.on('error', () => undefined);
    child.stdin.end(input ?? '');
  });
}

function log(message: string, extra: Record<string, unknown> = {}): void {
  process.stdout.write(`${JSON.stringify({ timestamp: new Date().toISOString(), component: 'kube-proxy(lab)', message, ...extra })}\n`);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { server: { type: 'string' }, ca: { type: 'string' }, 'token-file': { type: 'string' }, 'cluster-cidr': { type: 'string', default: '10.10.0.0/16' } },
    strict: true,
  });
  if (!values.server) throw new Error('kube-proxy(lab): --server is required');
  const client = KubeClient.fromCredentials({
    server: values.server,
    ...(values.ca ? { ca: readFileSync(values.ca, 'utf8') } : {}),
    ...(values['token-file'] ? { tokenFile: values['token-file'] } : {}),
  });
  const clusterCIDR = values['cluster-cidr']!;
  let chains: string[] = [];
  let last = '';
  let stopping = false;
  const watches = new Set<ClientRequest>();

  const sync = async (): Promise<{ services: string; slices: string }> => {
    const [svcs, slices] = await Promise.all([
      client.request<{ items: ServiceLite[]; metadata: { resourceVersion: string } }>('GET', '/api/v1/services'),
      client.request<{ items: SliceLite[]; metadata: { resourceVersion: string } }>('GET', '/apis/discovery.k8s.io/v1/endpointslices'),
    ]);
    const table = renderKubeProxyTable(kubeProxyServices(svcs.items, slices.items, clusterCIDR), chains);
    if (table.payload !== last) {
      const r = await run('iptables-restore', ['-w', '--noflush'], table.payload);
      if (r.code !== 0) throw new Error(`iptables-restore: ${r.stderr.trim()}`);
      log('synced', { servicePorts: kubeProxyServices(svcs.items, slices.items, clusterCIDR).length, chains: table.chains.length });
      last = table.payload;
      chains = table.chains;
    }
    return { services: svcs.metadata.resourceVersion, slices: slices.metadata.resourceVersion };
  };

  // Any watch event means: list again and rewrite (a lab-sized cluster lists in milliseconds).
  const changed = (path: string, rv: string): Promise<void> => new Promise((resolve) => {
    void client.applyToFetchOptions().then(({ agent, headers }) => {
      const url = new URL(`${client.server}${path}?watch=true&resourceVersion=${rv}&timeoutSeconds=60`);
      const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
      const req = send(url, { agent, headers }, (res: IncomingMessage) => {
        if (res.statusCode !== 200) { res.resume(); setTimeout(resolve, 1000); return; }
        res.once('data', () => { req.destroy(); resolve(); });
        res.on('end', () => resolve());
        res.on('error', () => resolve());
      });
      watches.add(req);
      req.on('error', () => setTimeout(resolve, 1000));
      req.on('close', () => watches.delete(req));
      req.end();
    }, () => setTimeout(resolve, 1000));
  });

  process.once('SIGTERM', () => {
    stopping = true;
    for (const w of watches) w.destroy();
    void run('iptables-restore', ['-w', '--noflush'], renderKubeProxyTableTeardown(chains)).then((r) => {
      if (r.code !== 0) log('cleanup failed', { stderr: r.stderr.trim() });
      else log('cleaned up', { chains: chains.length });
      client.close();
      process.exit(r.code === 0 ? 0 : 1);
    });
  });

  log('started', { server: values.server, clusterCIDR });
  let first = true;
  while (!stopping) {
    try {
      const rv = await sync();
      if (first) {
        // kube-proxy's EnsureRule, once its chains exist: each jump inserted first unless it is there.
        for (const j of KUBE_PROXY_JUMPS) {
          if ((await run('iptables', ['-w', '-t', 'nat', '-C', j.chain, ...j.args])).code !== 0) {
            const r = await run('iptables', ['-w', '-t', 'nat', '-I', j.chain, ...j.args]);
            if (r.code !== 0) throw new Error(`iptables -I ${j.chain}: ${r.stderr.trim()}`);
          }
        }
        process.stdout.write('ready\n');
        first = false;
      }
      await Promise.race([changed('/api/v1/services', rv.services), changed('/apis/discovery.k8s.io/v1/endpointslices', rv.slices)]);
      for (const w of watches) w.destroy();
      await new Promise((r) => setTimeout(r, 50)); // a burst of events is one sync
    } catch (e) {
      log('sync failed', { error: (e as Error).message });
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

if (process.argv[1]?.endsWith('/cluster/kube-proxy.js')) {
  main().catch((e: unknown) => {
    process.stderr.write(`${(e as Error).message}\n`);
    process.exit(1);
  });
}
