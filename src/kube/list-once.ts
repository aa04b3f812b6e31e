// One list of everything a KubeSource watches, for commands that read the cluster once
// (`explain`, `status` with --source kube): bounded in time, and failing with a message that
// names the resource and the cause (unreachable, 401, 403, ...) instead of retrying for ever.
import type {
  KubernetesListObject, KubernetesObject, V1EndpointSlice, V1Node, V1Service,
} from '@kubernetes/client-node';
import { validateConfig } from '../config/load.js';
import { CONFIG_GROUP, CONFIG_NAME, CONFIG_VERSION, type ConfigResult } from '../config/schema.js';
import type { Problem } from '../desired/types.js';
import type { SourceEvent } from '../source/types.js';
import { ConfigGate } from '../source/config-gate.js';
import { type KubeClient, pager } from './client.js';
import { describeError, httpStatus, listAllPages } from './informer.js';

export interface ListOnceOptions {
  /** The whole listing must finish within this (default 15 s). */
  timeoutMs?: number;
  /** Objects per list request (limit/continue), default 500. */
  pageSize?: number;
  /** Config validation (default: the CRD schema's). */
  validate?: (obj: unknown) => ConfigResult;
}

/** What one list found: upsert events as KubeSource's initial list sends them, and an invalid config's problem. */
export interface ListOnceResult {
  events: SourceEvent[];
  problems: Problem[];
}

/**
 * Lists Services, EndpointSlices, this node's Node and the IPVSProxyConfig "default" once (a CRD
 * not installed means no config). Rejects with "listing <resource> from <server> failed: <cause>"
 * on the first failure, or "... did not answer within N s" after `timeoutMs`.
 */
export async function listOnce(client: KubeClient, nodeName: string,
  opts: ListOnceOptions = {}): Promise<ListOnceResult> {
  const timeoutMs = opts.timeoutMs ?? 15_000;
  const limit = opts.pageSize ?? 500;
  const validate = opts.validate ?? validateConfig;
  const server = client.server;
  const pending = new Set<string>();
  const list = async <T extends KubernetesObject>(name: string,
    page: (c: string | undefined) => Promise<KubernetesListObject<T>>, optional = false): Promise<T[]> => {
    pending.add(name);
    try {
      return (await listAllPages(page)).items;
    } catch (e) {
      if (optional && httpStatus(e) === 404) return [];
      const status = httpStatus(e);
      const hint = status === 401 ? ' (credentials refused)'
        : status === 403 ? ' (forbidden: check the RBAC rules)' : '';
      throw new Error(`listing ${name} from ${server} failed: ${describeError(e)}${hint}`);
    } finally {
      pending.delete(name);
    }
  };
  const all = Promise.all([
    list<V1Service>('services', pager<KubernetesListObject<V1Service>>(client, '/api/v1/services', { limit })),
    list<V1EndpointSlice>('endpointslices', pager<KubernetesListObject<V1EndpointSlice>>(client,
      '/apis/discovery.k8s.io/v1/endpointslices', { limit })),
    list<V1Node>('node', pager<KubernetesListObject<V1Node>>(client, '/api/v1/nodes',
      { fieldSelector: `metadata.name=${nodeName}`, limit })),
    list<KubernetesObject>('ipvsproxyconfig', pager<KubernetesListObject<KubernetesObject>>(client,
      `/apis/${CONFIG_GROUP}/${CONFIG_VERSION}/ipvsproxyconfigs`,
      { fieldSelector: `metadata.name=${CONFIG_NAME}`, limit }), true),
  ]);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    const still = () => [...pending].join(', ');
    const after = `${timeoutMs / 1000} s`;
    timer = setTimeout(() => reject(new Error(
      `the Kubernetes API at ${server} did not answer within ${after} (still listing ${still()})`)), timeoutMs);
  });
  try {
    const [services, slices, nodes, configs] = await Promise.race([all, timeout]);
    const events: SourceEvent[] = [
      ...services.map((object) => ({ kind: 'service', type: 'upsert', object }) as const),
      ...slices.map((object) => ({ kind: 'endpointslice', type: 'upsert', object }) as const),
      ...nodes.map((object) => ({ kind: 'node', type: 'upsert', object }) as const),
    ];
    const problems: Problem[] = [];
    const gate = new ConfigGate(validate);
    for (const c of configs) {
      const v = gate.upsert(c);
      if (!v.ok) problems.push({ service: '', reason: 'InvalidConfig',
        message: `invalid IPVSProxyConfig, the defaults apply: ${v.errors}` });
      else if (v.event) events.push(v.event);
    }
    return { events, problems };
  } finally {
    clearTimeout(timer);
    all.catch(() => undefined); // a list failing after the timeout is not an unhandled rejection
  }
}
