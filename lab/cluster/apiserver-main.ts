#!/usr/bin/env node
// The lab cluster's API server as a process:
//   node dist/lab/cluster/apiserver-main.js --listen 0.0.0.0:6443 --cert F --key F --tokens F \
//     --rbac manifests/clusterrole.yaml --rbac manifests/clusterrolebinding.yaml \
//     [--service-cidr 10.200.1.0/24,fd00:10:200::/108] [--node-port-range 30000-32767] [--seed F.yaml ...]
//     [--advertise-address IP]  (the `kubernetes` Service's endpoint)
//     [--load-balancer-pool CIDR]  (IPv4: LoadBalancer ingress IPs, loadbalancer.ts)
//     [--etcd-servers http://127.0.0.1:2379]  (the persistent store, etcd.ts; none: in memory)
//     [--pod-log-dir DIR]  (the lab kubelet's container logs, for `kubectl logs`: podlog.ts)
//     [--exec netns]  (`kubectl exec` runs the command in the pod's network namespace: exec.ts)
// Prints one JSON line {"ready":true,"url":...} on stdout once listening, logs requests that fail
// (4xx/5xx are answered, never fatal) nowhere, and exits 0 on SIGTERM/SIGINT after closing (every
// change written to etcd first). Started again over the same etcd, it serves what it served:
// objects, resourceVersions, the watch history since the last compaction; --seed objects that
// exist already are left as they are.
// Without --tokens every request is allowed (no authentication); without --cert it serves HTTP.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { DEFAULT_ALLOC, parseIp } from './alloc.js';
import { LabApiServer, type LabApiServerOptions } from './apiserver.js';
import { netnsRuntime } from './exec.js';
import { poolAddresses } from './loadbalancer.js';
import { parseTokenFile } from './rbac.js';
import { RESOURCES, type ResourceInfo, type ResourceName, apiVersionOf } from './store.js';

/** Parsed command line of the API server process. */
export interface ApiServerArgs {
  host: string; port: number; cert?: string; key?: string; tokens?: string; rbac: string[];
  serviceCIDRs: string[]; nodePortRange: [number, number]; seed: string[]; advertiseAddress?: string; loadBalancerPool?: string;
  etcd?: string; podLogDir?: string; exec?: 'netns';
}

/** Parses the command line; throws with a usage message on anything unknown or malformed. */
export function parseApiServerArgs(argv: readonly string[]): ApiServerArgs {
  const out: ApiServerArgs = { host: '127.0.0.1', port: 6443, rbac: [], serviceCIDRs: DEFAULT_ALLOC.serviceCIDRs, nodePortRange: DEFAULT_ALLOC.nodePortRange, seed: [] };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const value = argv[++i];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    switch (flag) {
      case '--listen': {
        const m = /^\[?([^\]]*?)\]?:(\d+)$/.exec(value);
        if (!m) throw new Error(`--listen: expected host:port, got "${value}"`);
        out.host = m[1]!;
        out.port = Number(m[2]);
        break;
      }
      case '--cert': out.cert = value; break;
      case '--key': out.key = value; break;
      case '--tokens': out.tokens = value; break;
      case '--rbac': out.rbac.push(value); break;
      case '--seed': out.seed.push(value); break;
      case '--etcd-servers':
        if (!/^http:\/\/[^/,]+$/.test(value)) throw new Error(`--etcd-servers: expected one http://host:port, got "${value}"`);
        out.etcd = value;
        break;
      case '--pod-log-dir': out.podLogDir = value; break;
      case '--exec':
        if (value !== 'netns') throw new Error(`--exec: expected netns, got "${value}"`);
        out.exec = value;
        break;
      case '--advertise-address':
        if (!parseIp(value)) throw new Error(`--advertise-address: expected an IP address, got "${value}"`);
        out.advertiseAddress = value;
        break;
      case '--service-cidr': out.serviceCIDRs = value.split(',').filter(Boolean); break;
      case '--load-balancer-pool':
        try {
          poolAddresses(value);
        } catch {
          throw new Error(`--load-balancer-pool: expected an IPv4 CIDR, got "${value}"`);
        }
        out.loadBalancerPool = value;
        break;
      case '--node-port-range': {
        const m = /^(\d+)-(\d+)$/.exec(value);
        if (!m || Number(m[1]) > Number(m[2])) throw new Error(`--node-port-range: expected LO-HI, got "${value}"`);
        out.nodePortRange = [Number(m[1]), Number(m[2])];
        break;
      }
      default: throw new Error(`unknown flag ${flag}`);
    }
  }
  if (!!out.cert !== !!out.key) throw new Error('--cert and --key go together');
  return out;
}

/** The resource a manifest document is stored as (by apiVersion and kind), or undefined. */
export function resourceOfDocument(apiVersion: string, kind: string): ResourceName | undefined {
  return (Object.keys(RESOURCES) as ResourceName[]).find((k) => {
    const i: ResourceInfo = RESOURCES[k];
    return apiVersionOf(i) === apiVersion && i.kind === kind;
  });
}

async function main(): Promise<void> {
  const args = parseApiServerArgs(process.argv.slice(2));
  const opts: LabApiServerOptions = {
    host: args.host, port: args.port,
    lab: {
      alloc: { serviceCIDRs: args.serviceCIDRs, nodePortRange: args.nodePortRange },
      ...(args.advertiseAddress ? { advertiseAddress: args.advertiseAddress } : {}),
      ...(args.loadBalancerPool ? { loadBalancerPool: args.loadBalancerPool } : {}),
    },
    ...(args.podLogDir ? { podLogDir: args.podLogDir } : {}),
    ...(args.exec === 'netns' ? { exec: netnsRuntime } : {}),
    ...(args.cert && args.key ? { tls: { cert: readFileSync(args.cert, 'utf8'), key: readFileSync(args.key, 'utf8') } } : {}),
    ...(args.tokens ? { auth: { tokens: parseTokenFile(readFileSync(args.tokens, 'utf8')), rbacYaml: args.rbac.map((f) => readFileSync(f, 'utf8')) } } : {}),
    ...(args.etcd ? { etcd: args.etcd } : {}),
  };
  const server = await LabApiServer.start(opts);
  for (const file of args.seed) {
    for (const d of parseAllDocuments(readFileSync(file, 'utf8'))) {
      const o = d.toJS() as { apiVersion?: string; kind?: string; metadata?: { name?: string; namespace?: string } } | null;
      if (!o?.apiVersion || !o.kind) continue;
      const r = resourceOfDocument(o.apiVersion, o.kind);
      if (!r) throw new Error(`--seed ${file}: ${o.apiVersion} ${o.kind} is not served`);
      if (o.metadata?.name && server.get(r, o.metadata.name, RESOURCES[r].namespaced ? o.metadata.namespace ?? 'default' : undefined)) continue;
      server.create(r, o);
    }
  }
  process.stdout.write(`${JSON.stringify({ ready: true, url: server.url })}\n`);
  const stop = () => void server.close().then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((e: unknown) => {
    process.stderr.write(`apiserver: ${(e as Error).message}\n`);
    process.exit(1);
  });
}
