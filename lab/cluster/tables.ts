// Server-side printing for kubectl, pure: `kubectl get` asks for a meta.k8s.io/v1 Table and prints
// its columns (priority 1 only with -o wide). Columns follow the real server's printers for the
// resources the lab walkthrough shows (nodes, pods, services, endpointslices, events, deployments,
// replicasets); every other resource gets NAME and AGE. Values are approximations of the real ones (no restarts counted,
// events' LAST SEEN from lastTimestamp or eventTime).

type O = Record<string, unknown> & { metadata: { name: string; creationTimestamp?: string; labels?: Record<string, string>; deletionTimestamp?: string } };
type Col = [name: string, priority: 0 | 1, cell: (o: O) => string | number];

/** Whether an Accept header asks for a Table (kubectl get does). */
export function wantsTable(accept: string | undefined): boolean {
  return !!accept && /as=Table/.test(accept);
}

/** A meta.k8s.io/v1 Table of `objects` of `resource`, each row with its object when `withObjects`. */
export function tableOf(resource: string, objects: readonly object[], withObjects: boolean): Record<string, unknown> {
  const cols = COLUMNS[resource] ?? [];
  const name: Col = ['Name', 0, (o) => o.metadata.name];
  // Events list their name last and only with -o wide, as the real printer does.
  const all: Col[] = resource === 'events' ? [...cols, ['Name', 1, name[2]]] : [name, ...cols];
  if (!cols.some(([n]) => n === 'Age')) all.push(['Age', 0, (o) => age(o.metadata.creationTimestamp)]);
  return {
    kind: 'Table', apiVersion: 'meta.k8s.io/v1', metadata: {},
    columnDefinitions: all.map(([name, priority]) => ({ name, type: 'string', format: name === 'Name' ? 'name' : '', description: '', priority })),
    rows: (objects as O[]).map((o) => ({ cells: all.map(([, , cell]) => cell(o)), ...(withObjects ? { object: o } : {}) })),
  };
}

/** A duration as kubectl shows ages: 45s, 12m, 3h, 2d. */
export function age(since: string | undefined, nowMs = Date.now()): string {
  if (!since) return '<unknown>';
  const s = Math.max(0, Math.floor((nowMs - Date.parse(since)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

const at = (o: unknown, ...path: string[]): unknown => path.reduce<unknown>((c, p) => (c && typeof c === 'object' ? (c as Record<string, unknown>)[p] : undefined), o);
const str = (v: unknown, none = '<none>') => (v === undefined || v === null || v === '' ? none : String(v));
type Addr = { type: string; address: string };
type Cond = { type: string; status: string };

type ContainerStatus = { restartCount?: number; state?: { waiting?: { reason?: string }; terminated?: { reason?: string; exitCode?: number; signal?: number } } };
const containerStatuses = (o: O) => (at(o, 'status', 'containerStatuses') as ContainerStatus[] | undefined) ?? [];

/** kubectl's STATUS of a pod (printPod, shortened): Terminating, else a waiting or terminated container's reason, else the phase. */
function podStatusText(o: O): string {
  if (o.metadata.deletionTimestamp) return 'Terminating';
  let reason = str(at(o, 'status', 'phase'), 'Pending');
  for (const c of containerStatuses(o)) {
    const t = c.state?.terminated;
    if (c.state?.waiting?.reason) reason = c.state.waiting.reason;
    else if (t) reason = t.reason ?? (t.signal ? `Signal:${t.signal}` : `ExitCode:${t.exitCode ?? 0}`);
  }
  return reason;
}

const num = (v: unknown, none = 0) => (typeof v === 'number' ? v : none);
type Container = { name?: string; image?: string };
const containers = (o: O) => (at(o, 'spec', 'template', 'spec', 'containers') as Container[] | undefined) ?? [];
/** A Deployment's and a ReplicaSet's -o wide columns (the real printers'). */
const WORKLOAD_WIDE: Col[] = [
  ['Containers', 1, (o) => str(containers(o).map((c) => c.name ?? '').join(','))],
  ['Images', 1, (o) => str(containers(o).map((c) => c.image ?? '').join(','))],
  ['Selector', 1, (o) => str(Object.entries((at(o, 'spec', 'selector', 'matchLabels') as Record<string, string> | undefined) ?? {})
    .map(([k, v]) => `${k}=${v}`).join(','))],
];

const COLUMNS: Record<string, Col[]> = {
  nodes: [
    ['Status', 0, (o) => ((at(o, 'status', 'conditions') as Cond[] | undefined)?.find((c) => c.type === 'Ready')?.status === 'True' ? 'Ready' : 'NotReady')],
    ['Roles', 0, (o) => str(Object.keys(o.metadata.labels ?? {}).filter((k) => k.startsWith('node-role.kubernetes.io/')).map((k) => k.split('/')[1]).join(','))],
    ['Age', 0, (o) => age(o.metadata.creationTimestamp)],
    ['Version', 0, (o) => str(at(o, 'status', 'nodeInfo', 'kubeletVersion'), '')],
    ['Internal-IP', 1, (o) => str(((at(o, 'status', 'addresses') as Addr[] | undefined) ?? []).filter((a) => a.type === 'InternalIP').map((a) => a.address).join(','))],
    ['External-IP', 1, (o) => str(((at(o, 'status', 'addresses') as Addr[] | undefined) ?? []).filter((a) => a.type === 'ExternalIP').map((a) => a.address).join(','))],
    ['OS-Image', 1, (o) => str(at(o, 'status', 'nodeInfo', 'osImage'), '<unknown>')],
    ['Kernel-Version', 1, (o) => str(at(o, 'status', 'nodeInfo', 'kernelVersion'), '<unknown>')],
  ],
  pods: [
    ['Ready', 0, (o) => {
      const n = ((at(o, 'spec', 'containers') as unknown[] | undefined) ?? []).length;
      const ready = (at(o, 'status', 'conditions') as Cond[] | undefined)?.some((c) => c.type === 'Ready' && c.status === 'True');
      return `${ready ? n : 0}/${n}`;
    }],
    ['Status', 0, podStatusText],
    ['Restarts', 0, (o) => containerStatuses(o).reduce((n, c) => n + (c.restartCount ?? 0), 0)],
    ['Age', 0, (o) => age(o.metadata.creationTimestamp)],
    ['IP', 1, (o) => str(at(o, 'status', 'podIP'))],
    ['Node', 1, (o) => str(at(o, 'spec', 'nodeName'))],
  ],
  services: [
    ['Type', 0, (o) => str(at(o, 'spec', 'type'), 'ClusterIP')],
    ['Cluster-IP', 0, (o) => str(((at(o, 'spec', 'clusterIPs') as string[] | undefined) ?? []).join(',') || at(o, 'spec', 'clusterIP'))],
    ['External-IP', 0, (o) => str([...((at(o, 'status', 'loadBalancer', 'ingress') as Array<{ ip?: string }> | undefined) ?? []).map((i) => i.ip),
      ...((at(o, 'spec', 'externalIPs') as string[] | undefined) ?? [])].filter(Boolean).join(','), at(o, 'spec', 'type') === 'LoadBalancer' ? '<pending>' : '<none>')],
    ['Port(s)', 0, (o) => str(((at(o, 'spec', 'ports') as Array<{ port: number; nodePort?: number; protocol?: string }> | undefined) ?? [])
      .map((p) => `${p.port}${p.nodePort ? `:${p.nodePort}` : ''}/${p.protocol ?? 'TCP'}`).join(','))],
    ['Age', 0, (o) => age(o.metadata.creationTimestamp)],
    ['Selector', 1, (o) => str(Object.entries((at(o, 'spec', 'selector') as Record<string, string> | undefined) ?? {}).map(([k, v]) => `${k}=${v}`).join(','))],
  ],
  deployments: [
    ['Ready', 0, (o) => `${num(at(o, 'status', 'readyReplicas'))}/${num(at(o, 'spec', 'replicas'), 1)}`],
    ['Up-to-date', 0, (o) => num(at(o, 'status', 'updatedReplicas'))],
    ['Available', 0, (o) => num(at(o, 'status', 'availableReplicas'))],
    ['Age', 0, (o) => age(o.metadata.creationTimestamp)],
    ...WORKLOAD_WIDE,
  ],
  replicasets: [
    ['Desired', 0, (o) => num(at(o, 'spec', 'replicas'), 1)],
    ['Current', 0, (o) => num(at(o, 'status', 'replicas'))],
    ['Ready', 0, (o) => num(at(o, 'status', 'readyReplicas'))],
    ['Age', 0, (o) => age(o.metadata.creationTimestamp)],
    ...WORKLOAD_WIDE,
  ],
  endpointslices: [
    ['AddressType', 0, (o) => str(at(o, 'addressType'))],
    ['Ports', 0, (o) => str(((at(o, 'ports') as Array<{ port: number }> | undefined) ?? []).map((p) => p.port).join(','), '<unset>')],
    ['Endpoints', 0, (o) => str(((at(o, 'endpoints') as Array<{ addresses: string[] }> | undefined) ?? []).flatMap((e) => e.addresses).join(','), '<unset>')],
    ['Age', 0, (o) => age(o.metadata.creationTimestamp)],
  ],
  events: [
    ['Last Seen', 0, (o) => age(str(at(o, 'lastTimestamp'), '') || str(at(o, 'eventTime'), '') || o.metadata.creationTimestamp)],
    ['Type', 0, (o) => str(at(o, 'type'), '')],
    ['Reason', 0, (o) => str(at(o, 'reason'), '')],
    ['Object', 0, (o) => `${String(at(o, 'involvedObject', 'kind') ?? '').toLowerCase()}/${str(at(o, 'involvedObject', 'name'), '')}`],
    ['Message', 0, (o) => str(at(o, 'message'), '')],
  ],
};
