// The lab control plane's behaviour around each write, off for the unit tests' fake: admission
// (Service defaulting and ClusterIP/NodePort allocation, alloc.ts; new Pods Pending), the
// controllers that follow writes (EndpointSlices from Services, Pods and Nodes, controllers.ts;
// LoadBalancer ingress from a pool, loadbalancer.ts), graceful Pod deletion, Event expiry
// (kube-apiserver's --event-ttl) and what exists from the start (the usual namespaces and the
// `kubernetes` Service).
import type { LabOptions, Obj } from './api-types.js';
import { DEFAULT_ALLOC, type ServiceLike, allocateService, formatIp, parseCidr } from './alloc.js';
import { MANAGED_BY, MANAGED_BY_LABEL, type SliceLike, buildEndpointSlices } from './controllers.js';
import { type LbService, poolAddresses, reconcileLoadBalancers } from './loadbalancer.js';
import { objectKey } from './objects.js';
import { HttpError } from './status.js';
import { RESOURCES, type ResourceName } from './store.js';
import {
  type DeploymentLike, type NodeLike, type PodLike, type ReplicaSetLike, nameSuffix, orphansOf, planDeployment, planReplicaSet, schedulePods,
} from './workloads.js';

/** What the controllers write through: the server's own writes (each one seen by watches and, again, by the controllers). */
export interface Writes {
  put(resource: ResourceName, object: object): Obj;
  remove(resource: ResourceName, name: string, namespace?: string): boolean;
  get(resource: ResourceName, name: string, namespace?: string): Obj | undefined;
  list(resource: ResourceName): Obj[];
  /** When an object was last written (ms), or undefined. */
  writtenAt(resource: ResourceName, name: string, namespace?: string): number | undefined;
}

export class LabControlPlane {
  private reconciling = false;
  /** The LoadBalancer controller's pool, every address (empty: no controller). */
  private readonly lbPool: string[];
  private readonly graceTimers = new Map<string, NodeJS.Timeout>();
  /** When each Event goes (resource/namespace/name -> ms), as kube-apiserver's etcd lease of --event-ttl. */
  private readonly eventExpiry = new Map<string, number>();

  constructor(private readonly lab: LabOptions, private readonly api: Writes) {
    this.lbPool = lab.loadBalancerPool ? poolAddresses(lab.loadBalancerPool) : [];
  }

  /**
   * The usual namespaces and the `kubernetes` Service, the server listening on `port`: written
   * when missing or different, so a restart over a persistent store writes nothing when nothing
   * changed. What the store kept is picked up again: each Event's expiry (from its last write),
   * each terminating Pod's grace timer, and the controllers run once (as controllers resync at
   * start) for changes written to the store while this server was down.
   */
  bootstrap(port: number): void {
    for (const name of ['default', 'kube-system', 'kube-public', 'kube-node-lease']) {
      if (!this.api.get('namespaces', name)) this.api.put('namespaces', { metadata: { name }, spec: { finalizers: ['kubernetes'] }, status: { phase: 'Active' } });
    }
    this.putKubernetesService(port);
    const ttl = this.lab.eventTtlMs ?? 3_600_000;
    for (const resource of (Object.keys(RESOURCES) as ResourceName[]).filter((r) => RESOURCES[r].kind === 'Event')) {
      for (const o of this.api.list(resource)) {
        const at = this.api.writtenAt(resource, o.metadata.name, o.metadata.namespace) ?? (this.lab.clock ?? Date.now)();
        this.eventExpiry.set(`${resource}/${objectKey(o.metadata.namespace, o.metadata.name)}`, at + ttl);
      }
    }
    for (const pod of this.api.list('pods')) {
      if (pod.metadata.deletionTimestamp) this.graceTimer(pod.metadata.name, pod.metadata.namespace, Date.parse(pod.metadata.deletionTimestamp) - Date.now());
    }
    this.reconcile('services');
  }

  /** Writes `o` unless the stored object has the same `fields` already. */
  private putUnlessSame(resource: ResourceName, o: Obj, fields: readonly string[]): void {
    const cur = this.api.get(resource, o.metadata.name, o.metadata.namespace);
    const pick = (x: Obj) => JSON.stringify(fields.map((f) => x[f]));
    if (!cur || pick(cur) !== pick(o) || JSON.stringify(cur.metadata.labels) !== JSON.stringify(o.metadata.labels)) this.api.put(resource, o);
  }

  /**
   * The `kubernetes` Service in `default`, as kube-apiserver keeps it: the first address of the
   * primary service CIDR (alloc.ts never hands it out), https 443 to the server's own port, no
   * selector; with an advertise address, its EndpointSlice (written by the server, not the
   * EndpointSlice controller, which leaves selector-less Services alone).
   */
  private putKubernetesService(port: number): void {
    const range = parseCidr((this.lab.alloc ?? DEFAULT_ALLOC).serviceCIDRs[0]!);
    const ip = formatIp(range.family, range.base + 1n);
    this.putUnlessSame('services', {
      metadata: { name: 'kubernetes', namespace: 'default', labels: { component: 'apiserver', provider: 'kubernetes' } },
      spec: {
        type: 'ClusterIP', clusterIP: ip, clusterIPs: [ip], ipFamilies: [range.family], ipFamilyPolicy: 'SingleStack',
        ports: [{ name: 'https', port: 443, protocol: 'TCP', targetPort: port }], sessionAffinity: 'None', internalTrafficPolicy: 'Cluster',
      },
    }, ['spec']);
    if (!this.lab.advertiseAddress) return;
    this.putUnlessSame('endpointslices', {
      metadata: { name: 'kubernetes', namespace: 'default', labels: { 'kubernetes.io/service-name': 'kubernetes' } },
      addressType: this.lab.advertiseAddress.includes(':') ? 'IPv6' : 'IPv4',
      endpoints: [{ addresses: [this.lab.advertiseAddress], conditions: { ready: true } }],
      ports: [{ name: 'https', port, protocol: 'TCP' }],
    }, ['addressType', 'endpoints', 'ports']);
  }

  /** Defaulting and validation of a write: Services get their allocations; throws HttpError 422. */
  admit(resource: ResourceName, o: Obj, old: Obj | undefined): Obj {
    if (resource === 'services') {
      const others = this.api.list('services').filter((s) => !(s.metadata.name === o.metadata.name && s.metadata.namespace === o.metadata.namespace));
      const r = allocateService(o as ServiceLike, old as ServiceLike | undefined, others as ServiceLike[], this.lab.alloc ?? DEFAULT_ALLOC);
      if (!r.ok) throw new HttpError(422, 'Invalid', `Service "${o.metadata.name}" is invalid: ${r.message}`);
      return r.service as Obj;
    }
    if (resource === 'deployments' || resource === 'replicasets') {
      // metadata.generation counts spec changes (status.observedGeneration answers it).
      const gen = old?.metadata.generation ?? 0;
      o.metadata.generation = old && JSON.stringify(old.spec) === JSON.stringify(o.spec) ? gen : gen + 1;
    }
    if (resource === 'pods' && !old) {
      const pod = o as Obj & { status?: { phase?: string } };
      pod.status = { phase: 'Pending', ...(pod.status as object | undefined) };
    }
    return o;
  }

  /** After a stored write: an Event's TTL restarts; the controllers follow. */
  written(resource: ResourceName, o: Obj): void {
    if (RESOURCES[resource].kind === 'Event') {
      this.eventExpiry.set(`${resource}/${objectKey(o.metadata.namespace, o.metadata.name)}`, (this.lab.clock ?? Date.now)() + (this.lab.eventTtlMs ?? 3_600_000));
    }
    this.reconcile(resource);
  }

  /** After a delete: a pending grace timer goes; the controllers follow. */
  removed(resource: ResourceName, name: string, namespace?: string): void {
    clearTimeout(this.graceTimers.get(`${resource}/${objectKey(namespace, name)}`));
    this.reconcile(resource);
  }

  /**
   * A DELETE of `current` with the grace period asked for (none: the Pod's or the default). A
   * Pod on a node with a grace period is terminating until the grace ends (or a delete with
   * grace 0, the kubelet's): deletionTimestamp set, removed later. Returns the object to answer with.
   */
  delete(resource: ResourceName, current: Obj, asked: string | number | null | undefined): Obj {
    const { name, namespace } = current.metadata;
    const spec = current.spec as { nodeName?: string; terminationGracePeriodSeconds?: number } | undefined;
    const grace = asked !== undefined && asked !== null ? Number(asked) : spec?.terminationGracePeriodSeconds ?? this.lab.defaultGraceSeconds ?? 30;
    if (resource !== 'pods' || !spec?.nodeName || !(grace > 0)) {
      this.api.remove(resource, name, namespace);
      return current;
    }
    const end = Date.now() + grace * 1000;
    const was = current.metadata.deletionTimestamp ? Date.parse(current.metadata.deletionTimestamp) : Infinity;
    if (end >= was) return current;
    const next = structuredClone(current);
    next.metadata.deletionTimestamp = new Date(end).toISOString().replace(/\.\d+Z$/, 'Z');
    next.metadata.deletionGracePeriodSeconds = grace;
    const stored = this.api.put('pods', next);
    this.graceTimer(name, namespace, grace * 1000);
    return stored;
  }

  /** Removes a terminating Pod after `ms` (at once when it is past). */
  private graceTimer(name: string, namespace: string | undefined, ms: number): void {
    const timerKey = `pods/${objectKey(namespace, name)}`;
    clearTimeout(this.graceTimers.get(timerKey));
    const timer = setTimeout(() => {
      this.graceTimers.delete(timerKey);
      this.api.remove('pods', name, namespace);
    }, Math.max(0, ms));
    timer.unref();
    this.graceTimers.set(timerKey, timer);
  }

  /**
   * The workload controllers and the scheduler (workloads.ts), each step over the objects as the
   * step before left them, until a round writes nothing (a Deployment's new ReplicaSet gets its
   * pods, bound to nodes, in one reconcile). Bounded: a round that kept writing forever would be a
   * bug, logged by leaving the rest to the next write.
   */
  private reconcileWorkloads(): void {
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const random = this.lab.random ?? Math.random;
    for (let round = 0; round < 8; round++) {
      let wrote = false;
      const put = (resource: ResourceName, o: object) => {
        this.api.put(resource, o);
        wrote = true;
      };
      const deployments = this.api.list('deployments') as unknown as DeploymentLike[];
      // The garbage collector: ReplicaSets of a deleted Deployment, then Pods of a deleted ReplicaSet.
      for (const rs of orphansOf('Deployment', deployments, this.api.list('replicasets') as unknown as ReplicaSetLike[])) {
        wrote = this.api.remove('replicasets', rs.metadata.name, rs.metadata.namespace) || wrote;
      }
      const replicaSets = this.api.list('replicasets') as unknown as ReplicaSetLike[];
      for (const pod of orphansOf('ReplicaSet', replicaSets, this.api.list('pods') as unknown as PodLike[])) {
        this.delete('pods', pod as unknown as Obj, undefined);
        wrote = true;
      }
      for (const d of deployments) {
        const plan = planDeployment(d, replicaSets, now);
        if (plan.create) put('replicasets', plan.create);
        for (const { rs, replicas } of plan.resize) put('replicasets', { ...rs, spec: { ...rs.spec, replicas } });
        if (JSON.stringify(d.status) !== JSON.stringify(plan.status)) put('deployments', { ...d, status: plan.status });
      }
      const pods = this.api.list('pods') as unknown as PodLike[];
      for (const rs of this.api.list('replicasets') as unknown as ReplicaSetLike[]) {
        const plan = planReplicaSet(rs, pods, () => nameSuffix(random), (name) => !!this.api.get('pods', name, rs.metadata.namespace));
        for (const p of plan.create) put('pods', p);
        for (const p of plan.remove) {
          this.delete('pods', p as unknown as Obj, undefined);
          wrote = true;
        }
        if (JSON.stringify(rs.status ?? {}) !== JSON.stringify(plan.status)) put('replicasets', { ...rs, status: plan.status });
      }
      for (const { pod, node } of schedulePods(this.api.list('pods') as unknown as PodLike[], this.api.list('nodes') as unknown as NodeLike[])) {
        put('pods', { ...pod, spec: { ...pod.spec, nodeName: node }, status: { ...pod.status, conditions: [{ type: 'PodScheduled', status: 'True', lastTransitionTime: now }] } });
      }
      if (!wrote) return;
    }
  }

  /** Deletes the Events whose TTL ran out since their last write (DELETED to watchers). */
  expireEvents(): void {
    if (this.eventExpiry.size === 0) return;
    const t = (this.lab.clock ?? Date.now)();
    for (const [k, at] of this.eventExpiry) {
      if (at > t) continue;
      this.eventExpiry.delete(k);
      const [resource, ns, name] = k.split('/') as [ResourceName, string, string];
      this.api.remove(resource, name, ns || undefined);
    }
  }

  /** Drops the pending grace timers (the server is closing). */
  stop(): void {
    for (const t of this.graceTimers.values()) clearTimeout(t);
  }

  /**
   * The controllers: after a write of a Service, Pod or Node, the EndpointSlices follow; after a
   * Service write, LoadBalancer ingress IPs follow (when the lab has a pool).
   */
  private reconcile(resource: ResourceName): void {
    if (this.reconciling || !['services', 'pods', 'nodes', 'namespaces', 'deployments', 'replicasets'].includes(resource)) return;
    this.reconciling = true;
    try {
      if (resource !== 'services') this.reconcileWorkloads();
      if (resource === 'services' && this.lbPool.length) {
        for (const [svc, ip] of reconcileLoadBalancers(this.api.list('services') as LbService[], this.lbPool)) {
          const cur = svc as Obj & LbService;
          this.api.put('services', { ...cur, status: { ...cur.status, loadBalancer: ip ? { ingress: [{ ip, ipMode: 'VIP' }] } : {} } });
        }
      }
      const pods = this.api.list('pods');
      const nodes = this.api.list('nodes');
      const want = new Map<string, SliceLike>();
      for (const svc of this.api.list('services')) {
        for (const s of buildEndpointSlices(svc as never, pods as never, nodes as never)) want.set(objectKey(s.metadata.namespace, s.metadata.name), s);
      }
      for (const cur of this.api.list('endpointslices')) {
        if (cur.metadata.labels?.[MANAGED_BY_LABEL] !== MANAGED_BY) continue;
        if (!want.has(objectKey(cur.metadata.namespace, cur.metadata.name))) this.api.remove('endpointslices', cur.metadata.name, cur.metadata.namespace);
      }
      for (const s of want.values()) {
        const cur = this.api.get('endpointslices', s.metadata.name, s.metadata.namespace);
        const same = cur && JSON.stringify([cur.metadata.labels, cur.addressType, cur.endpoints, cur.ports]) ===
          JSON.stringify([s.metadata.labels, s.addressType, s.endpoints, s.ports]);
        if (!same) this.api.put('endpointslices', { ...s, metadata: { ...cur?.metadata, ...s.metadata } });
      }
    } finally {
      this.reconciling = false;
    }
  }
}
