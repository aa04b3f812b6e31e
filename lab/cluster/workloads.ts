// The lab control plane's workload controllers and scheduler, pure: what kube-controller-manager's
// Deployment and ReplicaSet controllers, its garbage collector and kube-scheduler would write,
// from the objects as they are. The lab API server applies the result after every write of a
// Deployment, ReplicaSet, Pod or Node (admission.ts), until nothing is left to write.
//
// Kept from upstream (pkg/controller/deployment, pkg/controller/replicaset, controller_utils.go):
// - a Deployment owns one ReplicaSet per pod template, `<deployment>-<pod-template-hash>`, the hash
//   an FNV-32a of the template encoded with SafeEncodeString, added to the ReplicaSet's selector,
//   labels and template labels as `pod-template-hash`; ownerReferences with controller: true;
// - a ReplicaSet makes or deletes Pods until its active pods (not terminating, not Succeeded or
//   Failed) are spec.replicas: new pods are `<replicaset>-<5 characters>` (generateName and
//   utilrand.String's alphabet), deletions take the lowest ranked first (unscheduled, then
//   Pending, then not ready, then the newest), as getPodsToDelete does;
// - status: replicas, readyReplicas, availableReplicas (minReadySeconds 0: ready is available),
//   fullyLabeledReplicas, observedGeneration; a Deployment's updatedReplicas and its Available
//   condition;
// - the garbage collector's background deletion: a ReplicaSet whose controlling Deployment is gone,
//   and a Pod whose controlling ReplicaSet is gone, are deleted (Pods gracefully).
// Approximated: the rolling update is one step (the new ReplicaSet is scaled to spec.replicas at
// once, the old ones to 0 once the new one's pods are all available: maxSurge 100%), the new
// ReplicaSet is found by its hash label (not by comparing templates), no revision history limit,
// pause, progress deadline, collision count or adoption of orphans.
//
// The scheduler binds a pod without spec.nodeName to a Ready, schedulable node whose taints it
// tolerates and whose labels meet its nodeSelector, the one with the fewest pods of the same owner,
// then the fewest pods at all (name order breaks ties): kube-scheduler's default spreading
// (PodTopologySpread by hostname, then LeastAllocated) for pods without resource requests.

type OwnerRef = { apiVersion: string; kind: string; name: string; uid: string; controller?: boolean; blockOwnerDeletion?: boolean };
type Meta = {
  name: string; namespace?: string; uid?: string; labels?: Record<string, string>; annotations?: Record<string, string>;
  ownerReferences?: OwnerRef[]; deletionTimestamp?: string; creationTimestamp?: string; generation?: number; resourceVersion?: string;
};
/** A label selector (matchLabels and matchExpressions). */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: string; values?: string[] }>;
}
type Template = { metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> }; spec?: Record<string, unknown> };
type Condition = { type: string; status: string; reason?: string; message?: string; lastTransitionTime?: string; lastUpdateTime?: string };

export interface DeploymentLike { metadata: Meta; spec?: { replicas?: number; selector?: LabelSelector; template?: Template }; status?: Record<string, unknown> }
export interface ReplicaSetLike {
  metadata: Meta;
  spec?: { replicas?: number; selector?: LabelSelector; template?: Template };
  status?: { replicas?: number; readyReplicas?: number; availableReplicas?: number; fullyLabeledReplicas?: number; observedGeneration?: number };
}
export interface PodLike {
  metadata: Meta;
  spec?: { nodeName?: string; nodeSelector?: Record<string, string>; tolerations?: Array<{ key?: string; operator?: string; value?: string; effect?: string }> } & Record<string, unknown>;
  status?: { phase?: string; conditions?: Condition[] };
}
export interface NodeLike {
  metadata: Meta;
  spec?: { unschedulable?: boolean; taints?: Array<{ key: string; value?: string; effect: string }> };
  status?: { conditions?: Condition[] };
}

/** The label a Deployment adds to its ReplicaSets and their pods. */
export const POD_TEMPLATE_HASH = 'pod-template-hash';
/** utilrand's alphabet: no vowels (no words), no 0/1/3 (no confusion with letters). */
const ALPHANUMS = 'bcdfghjklmnpqrstvwxz2456789';

/** Whether `labels` meet `sel`; an empty or missing selector selects nothing, as for a workload. */
export function selectorMatches(sel: LabelSelector | undefined, labels: Record<string, string> | undefined): boolean {
  if (!sel || (!Object.keys(sel.matchLabels ?? {}).length && !(sel.matchExpressions ?? []).length)) return false;
  const l = labels ?? {};
  return Object.entries(sel.matchLabels ?? {}).every(([k, v]) => l[k] === v) && (sel.matchExpressions ?? []).every((e) => {
    const has = Object.hasOwn(l, e.key);
    switch (e.operator) {
      case 'In': return has && (e.values ?? []).includes(l[e.key]!);
      case 'NotIn': return !has || !(e.values ?? []).includes(l[e.key]!);
      case 'Exists': return has;
      case 'DoesNotExist': return !has;
      default: return false;
    }
  });
}

/** A selector in its string form (`app=web,tier in (a,b)`), as Scale's status.selector carries it. */
export function selectorString(sel: LabelSelector | undefined): string {
  const parts = Object.entries(sel?.matchLabels ?? {}).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}=${v}`);
  for (const e of sel?.matchExpressions ?? []) {
    if (e.operator === 'Exists') parts.push(e.key);
    else if (e.operator === 'DoesNotExist') parts.push(`!${e.key}`);
    else parts.push(`${e.key} ${e.operator.toLowerCase()} (${[...(e.values ?? [])].sort().join(',')})`);
  }
  return parts.join(',');
}

/** The autoscaling/v1 Scale of a Deployment or ReplicaSet (`kubectl scale` reads and writes it). */
export function scaleOf(o: { metadata: Meta; spec?: unknown; status?: unknown }): Record<string, unknown> {
  const spec = o.spec as { replicas?: number; selector?: LabelSelector } | undefined;
  const { name, namespace, uid, resourceVersion, creationTimestamp } = o.metadata;
  return {
    kind: 'Scale', apiVersion: 'autoscaling/v1',
    metadata: { name, namespace, uid, resourceVersion, creationTimestamp },
    spec: { replicas: spec?.replicas ?? 1 },
    status: { replicas: (o.status as { replicas?: number } | undefined)?.replicas ?? 0, selector: selectorString(spec?.selector) },
  };
}

/** JSON with object keys sorted: one text per value, whatever order it was written in. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`).join(',')}}`;
  return JSON.stringify(v) ?? 'null';
}

/** The pod-template-hash of a template: FNV-32a of it, the decimal digits mapped onto ALPHANUMS (SafeEncodeString). */
export function podTemplateHash(template: unknown): string {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(canonical(template ?? {}), 'utf8')) {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return [...String(h)].map((c) => ALPHANUMS[c.charCodeAt(0) % ALPHANUMS.length]).join('');
}

/** A 5-character name suffix from `random` (values in [0, 1)). */
export function nameSuffix(random: () => number): string {
  return Array.from({ length: 5 }, () => ALPHANUMS[Math.floor(random() * ALPHANUMS.length)]).join('');
}

/** The controlling owner reference of an object, if any. */
export function controllerOf(o: { metadata: Meta }): OwnerRef | undefined {
  return o.metadata.ownerReferences?.find((r) => r.controller);
}

const ownedBy = (owner: { metadata: Meta }) => (o: { metadata: Meta }) =>
  (o.metadata.namespace ?? 'default') === (owner.metadata.namespace ?? 'default') && !!owner.metadata.uid && controllerOf(o)?.uid === owner.metadata.uid;

const isReady = (p: PodLike) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
/** Active as the controllers count pods: not terminating, not finished. */
export const isActive = (p: PodLike): boolean => !p.metadata.deletionTimestamp && p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed';

/** What the Deployment controller writes for one Deployment: a ReplicaSet to create, ReplicaSets to resize, the status. */
export interface DeploymentPlan { create?: ReplicaSetLike; resize: Array<{ rs: ReplicaSetLike; replicas: number }>; status: Record<string, unknown> }

/** The Deployment controller's step for `d` over every ReplicaSet (see the file comment); `now` stamps a changed condition. */
export function planDeployment(d: DeploymentLike, replicaSets: readonly ReplicaSetLike[], now: string): DeploymentPlan {
  const desired = d.spec?.replicas ?? 1;
  const hash = podTemplateHash(d.spec?.template);
  const owned = replicaSets.filter(ownedBy(d));
  const current = owned.find((rs) => rs.metadata.labels?.[POD_TEMPLATE_HASH] === hash);
  const resize: DeploymentPlan['resize'] = [];
  let create: ReplicaSetLike | undefined;
  if (!current) {
    const labels = { ...d.spec?.template?.metadata?.labels, [POD_TEMPLATE_HASH]: hash };
    const sel = d.spec?.selector ?? {};
    create = {
      metadata: {
        name: `${d.metadata.name}-${hash}`, namespace: d.metadata.namespace ?? 'default', labels,
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: d.metadata.name, uid: d.metadata.uid ?? '', controller: true, blockOwnerDeletion: true }],
      },
      spec: {
        replicas: desired,
        selector: { ...sel, matchLabels: { ...sel.matchLabels, [POD_TEMPLATE_HASH]: hash } },
        template: { ...structuredClone(d.spec?.template ?? {}), metadata: { ...d.spec?.template?.metadata, labels } },
      },
    };
  } else if ((current.spec?.replicas ?? 1) !== desired) {
    resize.push({ rs: current, replicas: desired });
  }
  const newAvailable = current?.status?.availableReplicas ?? 0;
  for (const rs of owned) {
    if (rs === current || (rs.spec?.replicas ?? 1) === 0) continue;
    if (current && newAvailable >= desired) resize.push({ rs, replicas: 0 });
  }
  const sum = (f: (rs: ReplicaSetLike) => number | undefined) => owned.reduce((n, rs) => n + (f(rs) ?? 0), 0);
  const available = sum((rs) => rs.status?.availableReplicas);
  const isAvailable = available >= desired;
  const old = ((d.status as { conditions?: Condition[] } | undefined)?.conditions ?? []).find((c) => c.type === 'Available');
  const availableStatus = isAvailable ? 'True' : 'False';
  const condition: Condition = old?.status === availableStatus ? old : {
    type: 'Available', status: availableStatus, reason: isAvailable ? 'MinimumReplicasAvailable' : 'MinimumReplicasUnavailable',
    message: isAvailable ? 'Deployment has minimum availability.' : 'Deployment does not have minimum availability.', lastTransitionTime: now, lastUpdateTime: now,
  };
  const status = {
    observedGeneration: d.metadata.generation ?? 1,
    replicas: sum((rs) => rs.status?.replicas),
    updatedReplicas: current?.status?.replicas ?? 0,
    readyReplicas: sum((rs) => rs.status?.readyReplicas),
    availableReplicas: available,
    ...(desired - available > 0 ? { unavailableReplicas: desired - available } : {}),
    conditions: [condition],
  };
  return { ...(create ? { create } : {}), resize, status };
}

/** What the ReplicaSet controller writes for one ReplicaSet: Pods to create, Pods to delete (gracefully), the status. */
export interface ReplicaSetPlan { create: PodLike[]; remove: PodLike[]; status: NonNullable<ReplicaSetLike['status']> }

/**
 * The ReplicaSet controller's step for `rs` over every Pod: new pods named `<rs>-<suffix()>`
 * (`taken` says which names exist; a taken one is drawn again), or the lowest ranked active pods
 * deleted; the status from the pods as they are.
 */
export function planReplicaSet(rs: ReplicaSetLike, pods: readonly PodLike[], suffix: () => string, taken: (name: string) => boolean): ReplicaSetPlan {
  const mine = pods.filter(ownedBy(rs));
  const active = mine.filter(isActive);
  const want = rs.spec?.replicas ?? 1;
  const create: PodLike[] = [];
  const names = new Set<string>();
  for (let i = active.length; i < want; i++) {
    let name: string;
    do name = `${rs.metadata.name}-${suffix()}`; while (taken(name) || names.has(name));
    names.add(name);
    const t = rs.spec?.template ?? {};
    create.push({
      metadata: {
        name, namespace: rs.metadata.namespace ?? 'default', labels: { ...t.metadata?.labels },
        ...(t.metadata?.annotations ? { annotations: { ...t.metadata.annotations } } : {}),
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: rs.metadata.name, uid: rs.metadata.uid ?? '', controller: true, blockOwnerDeletion: true }],
      },
      spec: structuredClone(t.spec ?? {}),
      status: { phase: 'Pending' },
    });
  }
  const remove = active.length > want ? [...active].sort(deletionRank).slice(0, active.length - want) : [];
  const labels = rs.spec?.template?.metadata?.labels ?? {};
  const ready = active.filter(isReady).length;
  return {
    create, remove,
    status: {
      replicas: active.length, fullyLabeledReplicas: active.filter((p) => Object.entries(labels).every(([k, v]) => p.metadata.labels?.[k] === v)).length,
      readyReplicas: ready, availableReplicas: ready, observedGeneration: rs.metadata.generation ?? 1,
    },
  };
}

/** getPodsToDelete's order, the first deleted first: unscheduled, Pending before Running, not ready before ready, newer before older. */
function deletionRank(a: PodLike, b: PodLike): number {
  const phase = (p: PodLike) => ({ Pending: 0, Unknown: 1, Running: 2 } as Record<string, number>)[p.status?.phase ?? 'Pending'] ?? 0;
  return Number(!!a.spec?.nodeName) - Number(!!b.spec?.nodeName) || phase(a) - phase(b) || Number(isReady(a)) - Number(isReady(b)) ||
    (b.metadata.creationTimestamp ?? '').localeCompare(a.metadata.creationTimestamp ?? '') || b.metadata.name.localeCompare(a.metadata.name);
}

/** The garbage collector's background deletion: the `dependents` whose controller is of `kind` and is not among `owners`. */
export function orphansOf<T extends { metadata: Meta }>(kind: string, owners: ReadonlyArray<{ metadata: Meta }>, dependents: readonly T[]): T[] {
  const uids = new Set(owners.map((o) => o.metadata.uid));
  return dependents.filter((d) => {
    const ref = controllerOf(d);
    return ref?.kind === kind && !uids.has(ref.uid) && !d.metadata.deletionTimestamp;
  });
}

/** Whether a pod tolerates a taint (the taint's key and effect, Equal on the value or Exists). */
function tolerates(pod: PodLike, taint: { key: string; value?: string; effect: string }): boolean {
  return (pod.spec?.tolerations ?? []).some((t) => (t.effect === undefined || t.effect === '' || t.effect === taint.effect) &&
    (t.key === undefined || t.key === '' ? t.operator === 'Exists' : t.key === taint.key && (t.operator === 'Exists' || (t.value ?? '') === (taint.value ?? ''))));
}

/** Whether `pod` may go to `node`: Ready, schedulable, its NoSchedule/NoExecute taints tolerated, the pod's nodeSelector met. */
export function fits(pod: PodLike, node: NodeLike): boolean {
  const ready = node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
  if (!ready || node.spec?.unschedulable) return false;
  if ((node.spec?.taints ?? []).some((t) => (t.effect === 'NoSchedule' || t.effect === 'NoExecute') && !tolerates(pod, t))) return false;
  return Object.entries(pod.spec?.nodeSelector ?? {}).every(([k, v]) => node.metadata.labels?.[k] === v);
}

/**
 * The scheduler's bindings: each pod without a node (and not terminating), in name order, to the
 * node chosen as the file comment says, counting the bindings made before it; a pod no node fits
 * stays unscheduled (left out).
 */
export function schedulePods(pods: readonly PodLike[], nodes: readonly NodeLike[]): Array<{ pod: PodLike; node: string }> {
  const bound = pods.filter((p) => p.spec?.nodeName && isActive(p)).map((p) => ({ node: p.spec!.nodeName!, owner: controllerOf(p)?.uid }));
  const out: Array<{ pod: PodLike; node: string }> = [];
  const pending = pods.filter((p) => !p.spec?.nodeName && !p.metadata.deletionTimestamp).sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  for (const pod of pending) {
    const owner = controllerOf(pod)?.uid;
    const score = (n: NodeLike) => [bound.filter((b) => b.node === n.metadata.name && owner !== undefined && b.owner === owner).length, bound.filter((b) => b.node === n.metadata.name).length];
    const best = nodes.filter((n) => fits(pod, n)).map((n) => ({ n, s: score(n) }))
      .sort((a, b) => a.s[0]! - b.s[0]! || a.s[1]! - b.s[1]! || a.n.metadata.name.localeCompare(b.n.metadata.name))[0];
    if (!best) continue;
    out.push({ pod, node: best.n.metadata.name });
    bound.push({ node: best.n.metadata.name, owner });
  }
  return out;
}
