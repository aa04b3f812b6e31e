// The lab API server's resource table and request-independent helpers, pure: path parsing (the
// real server's RequestInfo rules), label and field selectors, the patch formats, discovery
// documents.
//
// Patch formats, and what of the real semantics is approximated:
// - application/merge-patch+json: RFC 7386, exact;
// - application/json-patch+json: RFC 6902 (add, remove, replace, move, copy, test), exact;
// - application/strategic-merge-patch+json: a merge patch, except that lists of objects that
//   come with a `$setElementOrder/<field>` directive (what kubectl apply/edit send) are merged
//   element by element on their merge key (name, port, containerPort, ip, type or key) and ordered
//   as the directive says, `$patch: delete` elements are removed, and `$retainKeys`,
//   `$deleteFromPrimitiveList/...` are ignored; any other list is replaced whole;
// - application/apply-patch+yaml (server-side apply): a merge patch of the applied object, or a
//   create when the object is missing; no managedFields, no field ownership, no conflicts.

/** One served resource. */
export interface ResourceInfo {
  group: string; version: string; plural: string; kind: string; namespaced: boolean;
  singular: string; shortNames?: string[]; status?: boolean; categories?: string[];
  /** Serves the autoscaling/v1 Scale subresource (`kubectl scale`): spec.replicas read and written through it. */
  scale?: boolean;
}

const r = (group: string, version: string, plural: string, kind: string, namespaced: boolean, extra: Partial<ResourceInfo> = {}): ResourceInfo =>
  ({ group, version, plural, kind, namespaced, singular: kind.toLowerCase(), ...extra });

/** Every resource the server serves, by a unique key (the plural, or `<plural>.<group>` for a second group). */
export const RESOURCES = {
  services: r('', 'v1', 'services', 'Service', true, { shortNames: ['svc'], status: true, categories: ['all'] }),
  endpointslices: r('discovery.k8s.io', 'v1', 'endpointslices', 'EndpointSlice', true),
  nodes: r('', 'v1', 'nodes', 'Node', false, { shortNames: ['no'], status: true }),
  events: r('', 'v1', 'events', 'Event', true, { shortNames: ['ev'] }),
  ipvsproxyconfigs: r('ipvs-operator.io', 'v1alpha1', 'ipvsproxyconfigs', 'IPVSProxyConfig', false, { shortNames: ['ipvscfg'], categories: ['ipvs-operator'] }),
  ipvsnodestates: r('ipvs-operator.io', 'v1alpha1', 'ipvsnodestates', 'IPVSNodeState', false, { shortNames: ['ipvsns'], status: true, categories: ['ipvs-operator'] }),
  ipvsloadreports: r('ipvs-operator.io', 'v1alpha1', 'ipvsloadreports', 'IPVSLoadReport', false, { shortNames: ['ipvslr'], categories: ['ipvs-operator'] }),
  ipvsserviceweights: r('ipvs-operator.io', 'v1alpha1', 'ipvsserviceweights', 'IPVSServiceWeights', true, { singular: 'ipvsserviceweight', shortNames: ['ipvssw'], categories: ['ipvs-operator'] }),
  leases: r('coordination.k8s.io', 'v1', 'leases', 'Lease', true),
  namespaces: r('', 'v1', 'namespaces', 'Namespace', false, { shortNames: ['ns'], status: true }),
  pods: r('', 'v1', 'pods', 'Pod', true, { shortNames: ['po'], status: true, categories: ['all'] }),
  serviceaccounts: r('', 'v1', 'serviceaccounts', 'ServiceAccount', true, { shortNames: ['sa'] }),
  configmaps: r('', 'v1', 'configmaps', 'ConfigMap', true, { shortNames: ['cm'] }),
  'events.events.k8s.io': r('events.k8s.io', 'v1', 'events', 'Event', true, { shortNames: ['ev'] }),
  daemonsets: r('apps', 'v1', 'daemonsets', 'DaemonSet', true, { shortNames: ['ds'], status: true, categories: ['all'] }),
  deployments: r('apps', 'v1', 'deployments', 'Deployment', true, { shortNames: ['deploy'], status: true, categories: ['all'], scale: true }),
  replicasets: r('apps', 'v1', 'replicasets', 'ReplicaSet', true, { shortNames: ['rs'], status: true, categories: ['all'], scale: true }),
  clusterroles: r('rbac.authorization.k8s.io', 'v1', 'clusterroles', 'ClusterRole', false),
  clusterrolebindings: r('rbac.authorization.k8s.io', 'v1', 'clusterrolebindings', 'ClusterRoleBinding', false),
  customresourcedefinitions: r('apiextensions.k8s.io', 'v1', 'customresourcedefinitions', 'CustomResourceDefinition', false, { shortNames: ['crd', 'crds'], status: true }),
} as const satisfies Record<string, ResourceInfo>;
/** A served resource's key. */
export type ResourceName = keyof typeof RESOURCES;

/** The key of the resource at `<group>/<version>/<plural>`, or undefined. */
export function resourceAt(group: string, version: string, plural: string): ResourceName | undefined {
  return (Object.keys(RESOURCES) as ResourceName[]).find((k) => {
    const i: ResourceInfo = RESOURCES[k];
    return i.group === group && i.version === version && i.plural === plural;
  });
}

/** apiVersion of a resource's objects. */
export function apiVersionOf(info: ResourceInfo): string {
  return info.group ? `${info.group}/${info.version}` : info.version;
}

/** A resource request's parts, as the real server's RequestInfo has them. */
export interface ResourcePath { group: string; version: string; plural: string; namespace?: string; name?: string; subresource?: string }

/**
 * `/api/v1/namespaces/ns1/services/x/status` -> its parts; undefined for a non-resource path.
 * As in the real server, `namespaces/<ns>/status|finalize` is the Namespace's subresource.
 */
export function parseResourcePath(path: string): ResourcePath | undefined {
  const parts = path.split('/').filter(Boolean);
  let group = '';
  let version: string;
  if (parts[0] === 'api' && parts.length >= 3) {
    version = parts[1]!;
    parts.splice(0, 2);
  } else if (parts[0] === 'apis' && parts.length >= 4) {
    group = parts[1]!;
    version = parts[2]!;
    parts.splice(0, 3);
  } else {
    return undefined;
  }
  let namespace: string | undefined;
  if ((parts[0] as string) === 'namespaces' && parts.length > 1) {
    namespace = parts[1];
    if (parts.length > 2 && !['status', 'finalize'].includes(parts[2]!)) parts.splice(0, 2);
  }
  if (parts.length > 3) return undefined;
  const [plural, name, subresource] = parts as [string, string?, string?];
  if (plural === 'namespaces' && namespace !== undefined && name === undefined) {
    return { group, version, plural, name: namespace, ...(parts[2] ? { subresource: parts[2] } : {}) };
  }
  return { group, version, plural, ...(namespace !== undefined ? { namespace } : {}), ...(name ? { name } : {}), ...(subresource ? { subresource } : {}) };
}

/** One requirement of a label or field selector. */
export interface Requirement { key: string; op: '=' | '!=' | 'in' | 'notin' | 'exists' | '!'; values: string[] }

/** Parses a label selector (`a=b,c!=d,e in (f,g),h notin (i),j,!k`); throws on garbage. */
export function parseLabelSelector(text: string | null): Requirement[] {
  const out: Requirement[] = [];
  const src = (text ?? '').trim();
  const re = /\s*(!?)([A-Za-z0-9._/-]+)\s*(?:(==|=|!=)\s*([A-Za-z0-9._-]*)|\s+(in|notin)\s*\(([^)]*)\))?\s*(?:,|$)/y;
  let m: RegExpExecArray | null;
  while (re.lastIndex < src.length && (m = re.exec(src))) {
    const [, not, key, eq, value, setOp, set] = m;
    if (not && (eq || setOp)) throw new Error(`unable to parse requirement: "${key}"`);
    if (eq) out.push({ key: key!, op: eq === '!=' ? '!=' : '=', values: [value ?? ''] });
    else if (setOp) out.push({ key: key!, op: setOp as 'in' | 'notin', values: set!.split(',').map((s) => s.trim()).filter(Boolean) });
    else out.push({ key: key!, op: not ? '!' : 'exists', values: [] });
    if (m[0].length === 0) break;
  }
  if (re.lastIndex < src.length && src.length > 0) throw new Error(`unable to parse requirement: found '${src.slice(re.lastIndex)}'`);
  return out;
}

/** Parses a field selector (`a.b=c,d!=e`); throws on garbage. */
export function parseFieldSelector(text: string | null): Requirement[] {
  return (text ?? '').split(',').filter(Boolean).map((term) => {
    const m = /^([A-Za-z0-9._-]+)\s*(==|=|!=)\s*(.*)$/.exec(term.trim());
    if (!m) throw new Error(`invalid selector: '${term}'; can't understand '${term}'`);
    return { key: m[1]!, op: m[2] === '!=' ? '!=' : '=', values: [m[3]!] };
  });
}

/** Whether a map (labels) or an object's fields (dotted paths) meet every requirement. */
export function selects(reqs: readonly Requirement[], lookup: (key: string) => string | undefined): boolean {
  return reqs.every((q) => {
    const v = lookup(q.key);
    switch (q.op) {
      case '=': return (v ?? '') === q.values[0];
      case '!=': return (v ?? '') !== q.values[0];
      case 'in': return v !== undefined && q.values.includes(v);
      case 'notin': return v === undefined || !q.values.includes(v);
      case 'exists': return v !== undefined;
      case '!': return v === undefined;
    }
    return false;
  });
}

/** The string at a dotted path of an object (`spec.nodeName`), or undefined. */
export function fieldAt(o: unknown, path: string): string | undefined {
  let cur: unknown = o;
  for (const p of path.split('.')) cur = typeof cur === 'object' && cur !== null ? (cur as Record<string, unknown>)[p] : undefined;
  return cur === undefined || cur === null ? undefined : typeof cur === 'object' ? JSON.stringify(cur) : String(cur);
}

/** RFC 7386 JSON merge patch (mutates and returns target when it is an object). */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
  const t = (typeof target === 'object' && target !== null && !Array.isArray(target) ? target : {}) as Record<string, unknown>;
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete t[k];
    else t[k] = mergePatch(t[k], v);
  }
  return t;
}

const MERGE_KEYS = ['name', 'port', 'containerPort', 'ip', 'type', 'key', 'mountPath', 'devicePath'];

/** The strategic-merge-patch approximation described in the file comment. */
export function strategicMergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
  const t = (typeof target === 'object' && target !== null && !Array.isArray(target) ? target : {}) as Record<string, unknown>;
  const p = patch as Record<string, unknown>;
  for (const [k, v] of Object.entries(p)) {
    if (k.startsWith('$')) continue;
    const order = p[`$setElementOrder/${k}`];
    if (v === null) delete t[k];
    else if (Array.isArray(v) && (Array.isArray(order) || v.some(isDirective))) t[k] = mergeList(t[k], v, Array.isArray(order) ? order : undefined);
    else if (Array.isArray(v)) t[k] = v.filter((e) => !isDirective(e));
    else t[k] = strategicMergePatch(t[k], v);
  }
  for (const [k, order] of Object.entries(p)) {
    const field = k.startsWith('$setElementOrder/') ? k.slice('$setElementOrder/'.length) : undefined;
    if (field && !(field in p) && Array.isArray(order)) t[field] = mergeList(t[field], [], order);
  }
  return t;
}

function isDirective(e: unknown): boolean {
  return typeof e === 'object' && e !== null && '$patch' in e;
}

function mergeList(target: unknown, patch: unknown[], order: unknown[] | undefined): unknown[] {
  const cur = Array.isArray(target) ? [...target] : [];
  // kubectl's $setElementOrder entries carry only the merge key: the best witness of which it is.
  const objs = (order?.length ? order : patch).filter((e): e is Record<string, unknown> => typeof e === 'object' && e !== null);
  const mk = objs.length ? MERGE_KEYS.find((k) => objs.every((e) => k in e)) : undefined;
  if (!mk) return patch.filter((e) => !isDirective(e));
  const keyOf = (e: unknown) => JSON.stringify((e as Record<string, unknown>)?.[mk]);
  for (const e of patch) {
    const i = cur.findIndex((c) => keyOf(c) === keyOf(e));
    if (isDirective(e) && (e as Record<string, unknown>).$patch === 'delete') {
      if (i >= 0) cur.splice(i, 1);
    } else if (i >= 0) cur[i] = strategicMergePatch(cur[i], e);
    else cur.push(strategicMergePatch({}, e));
  }
  if (!order) return cur;
  const rank = new Map(order.map((e, i) => [keyOf(e), i]));
  return cur.filter((c) => rank.has(keyOf(c))).sort((a, b) => rank.get(keyOf(a))! - rank.get(keyOf(b))!);
}

/** RFC 6902 JSON patch; throws with a message for a failed test or a bad path. */
export function jsonPatch(target: unknown, ops: unknown): unknown {
  if (!Array.isArray(ops)) throw new Error('a JSON patch must be an array of operations');
  let doc = structuredClone(target);
  for (const op of ops as Array<{ op?: string; path?: string; from?: string; value?: unknown }>) {
    const path = pointer(op.path);
    if (op.op === 'test') {
      if (JSON.stringify(get(doc, path)) !== JSON.stringify(op.value)) throw new Error(`test failed at ${op.path}`);
      continue;
    }
    let value = op.value;
    if (op.op === 'move' || op.op === 'copy') {
      value = structuredClone(get(doc, pointer(op.from)));
      if (op.op === 'move') doc = setAt(doc, pointer(op.from), undefined, 'remove');
    }
    if (!['add', 'remove', 'replace', 'move', 'copy'].includes(op.op ?? '')) throw new Error(`unknown JSON patch op "${op.op}"`);
    doc = setAt(doc, path, value, op.op === 'remove' ? 'remove' : op.op === 'replace' ? 'replace' : 'add');
  }
  return doc;
}

function pointer(p: string | undefined): string[] {
  if (p === undefined || (p !== '' && !p.startsWith('/'))) throw new Error(`bad JSON pointer "${p}"`);
  return p === '' ? [] : p.slice(1).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function get(doc: unknown, path: string[]): unknown {
  let cur = doc;
  for (const k of path) {
    if (typeof cur !== 'object' || cur === null || !(k in cur)) throw new Error(`path /${path.join('/')} does not exist`);
    cur = (cur as Record<string, unknown>)[k];
  }
  return cur;
}

function setAt(doc: unknown, path: string[], value: unknown, mode: 'add' | 'remove' | 'replace'): unknown {
  if (path.length === 0) return mode === 'remove' ? undefined : value;
  const parent = get(doc, path.slice(0, -1));
  const k = path[path.length - 1]!;
  if (Array.isArray(parent)) {
    const i = k === '-' ? parent.length : Number(k);
    if (!Number.isInteger(i) || i < 0 || i > parent.length || (mode !== 'add' && i >= parent.length)) throw new Error(`bad array index ${k}`);
    if (mode === 'add') parent.splice(i, 0, value);
    else if (mode === 'remove') parent.splice(i, 1);
    else parent[i] = value;
  } else if (typeof parent === 'object' && parent !== null) {
    const o = parent as Record<string, unknown>;
    if (mode !== 'add' && !(k in o)) throw new Error(`path /${path.join('/')} does not exist`);
    if (mode === 'remove') delete o[k];
    else o[k] = value;
  } else {
    throw new Error(`path /${path.join('/')} does not exist`);
  }
  return doc;
}

/** The discovery document of a non-resource path (/api, /apis, /api/v1, /apis/<g>[/<v>]), or undefined. */
export function discovery(path: string): unknown {
  const infos = Object.values(RESOURCES) as ResourceInfo[];
  const groups = [...new Set(infos.filter((i) => i.group).map((i) => `${i.group}/${i.version}`))];
  const groupDoc = (gv: string) => {
    const [name, version] = gv.split('/') as [string, string];
    const v = { groupVersion: gv, version };
    return { name, versions: [v], preferredVersion: v };
  };
  const p = path.replace(/\/+$/, '');
  if (p === '/api') return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] };
  if (p === '/apis') return { kind: 'APIGroupList', apiVersion: 'v1', groups: groups.map(groupDoc) };
  const gv = p === '/api/v1' ? 'v1' : p.startsWith('/apis/') ? p.slice('/apis/'.length) : undefined;
  if (gv === undefined) return undefined;
  if (!gv.includes('/')) {
    const g = groups.find((x) => x.startsWith(`${gv}/`));
    return g && gv !== 'v1' ? { kind: 'APIGroup', apiVersion: 'v1', ...groupDoc(g) } : gv === 'v1' ? resourceList('v1', infos) : undefined;
  }
  if (!groups.includes(gv)) return undefined;
  return resourceList(gv, infos);
}

const VERBS = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'];

function resourceList(gv: string, infos: ResourceInfo[]): unknown {
  const mine = infos.filter((i) => apiVersionOf(i) === gv);
  return {
    kind: 'APIResourceList', apiVersion: 'v1', groupVersion: gv,
    resources: mine.flatMap((i) => [
      { name: i.plural, singularName: i.singular, namespaced: i.namespaced, kind: i.kind, verbs: VERBS,
        ...(i.shortNames ? { shortNames: i.shortNames } : {}), ...(i.categories ? { categories: i.categories } : {}) },
      ...(i.status ? [{ name: `${i.plural}/status`, singularName: '', namespaced: i.namespaced, kind: i.kind, verbs: ['get', 'patch', 'update'] }] : []),
      // kubectl scale finds the Scale's group-version-kind here (the scale client's discovery resolver).
      ...(i.scale ? [{ name: `${i.plural}/scale`, singularName: '', namespaced: i.namespaced, group: 'autoscaling', version: 'v1', kind: 'Scale', verbs: ['get', 'patch', 'update'] }] : []),
    ]),
  };
}
