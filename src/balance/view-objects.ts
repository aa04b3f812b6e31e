// The cluster load view's API objects (crds/): one IPVSLoadReport per node (cluster-scoped, named
// after the node) with its per-backend IPVS counters for every opted-in Service port; one
// IPVSServiceWeights per Service with a weight per backend and port, written by the elected
// aggregator. Their bodies and their checks; pure.
import type { BackendCounters, NodeReport } from './estimate.js';
import { DEFAULT_DAMPING, type DampingConfig } from './damping.js';

export const VIEW_GROUP_VERSION = 'ipvs-operator.io/v1alpha1';
export const REPORTS_PATH = '/apis/ipvs-operator.io/v1alpha1/ipvsloadreports';
export const WEIGHTS_PATH = '/apis/ipvs-operator.io/v1alpha1/ipvsserviceweights';

/** The IPVSLoadReport body a node writes. */
export function reportObject(
  node: string, at: number, views: ReadonlyMap<string, BackendCounters[]>,
): Record<string, unknown> {
  return {
    apiVersion: VIEW_GROUP_VERSION, kind: 'IPVSLoadReport', metadata: { name: node },
    spec: {
      node, at: new Date(at).toISOString(),
      services: [...views].sort(([a], [b]) => (a < b ? -1 : 1)).map(([key, backends]) => ({ key, backends })),
    },
  };
}

/** Whether a value is a plain object (not null, not an array). */
export const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * An IPVSLoadReport from the API, as NodeReports per view key; or why it is malformed. Values are
 * not checked here beyond the shape: checkReport (estimate.ts) does that per Service.
 */
export function parseReportObject(o: unknown): { node: string; reports: Map<string, NodeReport> } | { error: string } {
  const spec = isRecord(o) ? o.spec : undefined;
  const name = isRecord(o) && isRecord(o.metadata) ? o.metadata.name : undefined;
  if (!isRecord(spec)) return { error: 'no spec' };
  if (typeof spec.node !== 'string' || spec.node !== name) {
    return { error: `spec.node ${JSON.stringify(spec.node)} is not the object's name ${JSON.stringify(name)}` };
  }
  const at = typeof spec.at === 'string' ? Date.parse(spec.at) : NaN;
  if (!Number.isFinite(at)) return { error: `spec.at ${JSON.stringify(spec.at)} is not a time` };
  if (!Array.isArray(spec.services)) return { error: 'spec.services is not a list' };
  const reports = new Map<string, NodeReport>();
  for (const s of spec.services) {
    if (!isRecord(s) || typeof s.key !== 'string' || !Array.isArray(s.backends)) {
      return { error: 'a spec.services entry is not { key, backends: [...] }' };
    }
    reports.set(s.key, { node: spec.node, at, backends: s.backends as BackendCounters[] });
  }
  return { node: spec.node, reports };
}

/** What the aggregator publishes for one Service port. */
export interface PortWeights {
  port: string;
  weights: Record<string, number>;
  /** Estimated mean time in system per backend, seconds (absent: not measured). */
  estimates?: Record<string, number>;
  /** Node -> the backend dealt it as its idle choice, by weight (first-choice.ts); at most DEAL_MAX_NODES. */
  firstChoices?: Record<string, string>;
}

/**
 * The IPVSServiceWeights body the aggregator writes for one Service; `reporters`, when given, are
 * the only nodes that report the Service (K by rendezvous hash, reporting.ts).
 */
export function weightsObject(
  namespace: string, name: string, leader: string, at: number, ports: readonly PortWeights[],
  reporters?: readonly string[],
): Record<string, unknown> {
  return {
    apiVersion: VIEW_GROUP_VERSION, kind: 'IPVSServiceWeights', metadata: { name, namespace },
    spec: { leader, at: new Date(at).toISOString(), ports: [...ports].sort((a, b) => (a.port < b.port ? -1 : 1)),
      ...(reporters ? { reporters: [...reporters].sort() } : {}) },
  };
}

/** A parsed IPVSServiceWeights: per view key, backend -> weight, and node -> first choice. */
export interface ParsedWeights {
  views: Map<string, Map<string, number>>;
  firstChoices: Map<string, Map<string, string>>;
  /** The nodes that report the Service; undefined: every node does. */
  reporters?: string[];
}

/**
 * A published IPVSServiceWeights, checked as any input: per view key, backend -> integer weight in
 * [minWeight, maxWeight], and node -> a backend the weights name. Any value out of range or of
 * the wrong type refuses the whole object.
 */
export function parseWeightsObject(
  o: unknown, damping: DampingConfig = DEFAULT_DAMPING,
): ParsedWeights | { error: string } {
  const meta = isRecord(o) ? o.metadata : undefined;
  const spec = isRecord(o) ? o.spec : undefined;
  if (!isRecord(meta) || typeof meta.name !== 'string' || typeof meta.namespace !== 'string') {
    return { error: 'no metadata.namespace and name' };
  }
  if (!isRecord(spec) || !Array.isArray(spec.ports)) return { error: 'spec.ports is not a list' };
  const views = new Map<string, Map<string, number>>();
  const firstChoices = new Map<string, Map<string, string>>();
  for (const p of spec.ports) {
    if (!isRecord(p) || typeof p.port !== 'string' || !isRecord(p.weights)) {
      return { error: 'a spec.ports entry is not { port, weights: {...} }' };
    }
    const m = new Map<string, number>();
    for (const [b, w] of Object.entries(p.weights)) {
      if (typeof w !== 'number' || !Number.isInteger(w) || w < damping.minWeight || w > damping.maxWeight) {
        return { error: `port ${p.port}: weight of ${b} is ${JSON.stringify(w)}, want an integer in ` +
          `${damping.minWeight}..${damping.maxWeight}` };
      }
      m.set(b, w);
    }
    const vk = `${meta.namespace}/${meta.name}/${p.port}`;
    views.set(vk, m);
    if (p.firstChoices === undefined) continue;
    if (!isRecord(p.firstChoices)) return { error: `port ${p.port}: firstChoices is not an object` };
    const c = new Map<string, string>();
    for (const [node, b] of Object.entries(p.firstChoices)) {
      if (typeof b !== 'string' || !m.has(b)) {
        const error = `port ${p.port}: first choice of ${node} is ${JSON.stringify(b)}, not a backend of its weights`;
        return { error };
      }
      c.set(node, b);
    }
    firstChoices.set(vk, c);
  }
  if (spec.reporters === undefined) return { views, firstChoices };
  if (!Array.isArray(spec.reporters) || spec.reporters.some((n) => typeof n !== 'string' || n === '')) {
    return { error: 'spec.reporters is not a list of node names' };
  }
  return { views, firstChoices, reporters: spec.reporters as string[] };
}
