// Cluster load view, the node's side and the API objects (issue 27): which Services opt in, what a
// node reports, what the aggregator publishes, and how a node applies published weights to its
// desired table. pure: no I/O; the clock is passed in.
//
// Objects (crds/): one IPVSLoadReport per node (cluster-scoped, named after the node) with that
// node's per-backend IPVS counters for every opted-in Service port; one IPVSServiceWeights per
// Service (its namespace and name) with a weight per backend and port, written by the elected
// aggregator. Weights steer new connections only; a stale or missing view means local weights.
import type { DesiredTable, DesiredVirtualServer, Problem } from '../desired/types.js';
import { type RealServer, formatHostPort, realServerKey } from '../model/ipvs.js';
import type { BackendCounters, NodeReport } from './estimate.js';
import { DEFAULT_DAMPING, type DampingConfig } from './damping.js';
import { RAMPABLE_SCHEDULERS } from './slow-start.js';
import { MAX_WEIGHT } from './weights.js';
import { overlayTable } from './overlay.js';
import { localFirstChoice, tiltFirstChoice } from './first-choice.js';

/** `ipvs-operator.io/balance: cluster` opts a Service into the cluster load view; `local` (the default) does not. */
export const BALANCE_ANNOTATION = 'ipvs-operator.io/balance';
export const BALANCE_MODES = ['local', 'cluster'] as const;

/** The Service's balance mode; an invalid value is an InvalidBalance problem and means `local`. */
export function chooseBalance(serviceId: string, annotations: Record<string, unknown> | undefined, problems: Problem[]): 'local' | 'cluster' {
  const raw = annotations?.[BALANCE_ANNOTATION];
  if (raw === undefined || raw === null || raw === '') return 'local';
  if (raw === 'local' || raw === 'cluster') return raw;
  problems.push({ service: serviceId, reason: 'InvalidBalance', message: `${BALANCE_ANNOTATION}: ${JSON.stringify(raw)} is not one of ${BALANCE_MODES.join(', ')}; balancing locally` });
  return 'local';
}

/** Why cluster weights do not apply to a kernel scheduler (the same schedulers as slow start: weights as shares). */
export function clusterBalanceInapplicable(scheduler: string): string | undefined {
  return RAMPABLE_SCHEDULERS.has(scheduler) ? undefined
    : `scheduler ${scheduler} does not use weights as shares (use wrr, wlc, sed, nq or twos), so cluster weights cannot steer it`;
}

/** One Service port across nodes: `namespace/name/portName`. */
export function viewKeyOf(d: Pick<DesiredVirtualServer, 'origin'>): string {
  return `${d.origin.namespace}/${d.origin.name}/${d.origin.portName}`;
}

/** What the kernel gives per real server, as the reporter reads it. */
export interface KernelDest {
  address: string; port: number; activeConns?: number; inactiveConns?: number;
  stats?: { conns: bigint; inBytes: bigint; outBytes: bigint };
}

/**
 * Sums the kernel's per-destination counters over every virtual server of a Service port on this
 * node (ClusterIP, NodePort, external and LB IPs of one port reach the same backends).
 */
export function countersByView(read: Iterable<{ viewKey: string; dests: readonly KernelDest[] }>): Map<string, BackendCounters[]> {
  const out = new Map<string, Map<string, BackendCounters>>();
  for (const { viewKey, dests } of read) {
    const m = out.get(viewKey) ?? new Map<string, BackendCounters>();
    out.set(viewKey, m);
    for (const d of dests) {
      const backend = formatHostPort(d.address, d.port);
      const c = m.get(backend) ?? { backend, active: 0, inactive: 0, conns: 0, inBytes: 0, outBytes: 0 };
      c.active += d.activeConns ?? 0;
      c.inactive += d.inactiveConns ?? 0;
      c.conns += Number(d.stats?.conns ?? 0n);
      c.inBytes += Number(d.stats?.inBytes ?? 0n);
      c.outBytes += Number(d.stats?.outBytes ?? 0n);
      m.set(backend, c);
    }
  }
  return new Map([...out].map(([k, m]) => [k, [...m.values()].sort((a, b) => (a.backend < b.backend ? -1 : 1))]));
}

export const VIEW_GROUP_VERSION = 'ipvs-operator.io/v1alpha1';
export const REPORTS_PATH = '/apis/ipvs-operator.io/v1alpha1/ipvsloadreports';
export const WEIGHTS_PATH = '/apis/ipvs-operator.io/v1alpha1/ipvsserviceweights';

/** The IPVSLoadReport body a node writes. */
export function reportObject(node: string, at: number, views: ReadonlyMap<string, BackendCounters[]>): Record<string, unknown> {
  return {
    apiVersion: VIEW_GROUP_VERSION, kind: 'IPVSLoadReport', metadata: { name: node },
    spec: {
      node, at: new Date(at).toISOString(),
      services: [...views].sort(([a], [b]) => (a < b ? -1 : 1)).map(([key, backends]) => ({ key, backends })),
    },
  };
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * An IPVSLoadReport from the API, as NodeReports per view key; or why it is malformed. Values are
 * not checked here beyond the shape: checkReport (estimate.ts) does that per Service.
 */
export function parseReportObject(o: unknown): { node: string; reports: Map<string, NodeReport> } | { error: string } {
  const spec = isRecord(o) ? o.spec : undefined;
  const name = isRecord(o) && isRecord(o.metadata) ? o.metadata.name : undefined;
  if (!isRecord(spec)) return { error: 'no spec' };
  if (typeof spec.node !== 'string' || spec.node !== name) return { error: `spec.node ${JSON.stringify(spec.node)} is not the object's name ${JSON.stringify(name)}` };
  const at = typeof spec.at === 'string' ? Date.parse(spec.at) : NaN;
  if (!Number.isFinite(at)) return { error: `spec.at ${JSON.stringify(spec.at)} is not a time` };
  if (!Array.isArray(spec.services)) return { error: 'spec.services is not a list' };
  const reports = new Map<string, NodeReport>();
  for (const s of spec.services) {
    if (!isRecord(s) || typeof s.key !== 'string' || !Array.isArray(s.backends)) return { error: 'a spec.services entry is not { key, backends: [...] }' };
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
export function weightsObject(namespace: string, name: string, leader: string, at: number, ports: readonly PortWeights[],
  reporters?: readonly string[]): Record<string, unknown> {
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
export function parseWeightsObject(o: unknown, damping: DampingConfig = DEFAULT_DAMPING): ParsedWeights | { error: string } {
  const meta = isRecord(o) ? o.metadata : undefined;
  const spec = isRecord(o) ? o.spec : undefined;
  if (!isRecord(meta) || typeof meta.name !== 'string' || typeof meta.namespace !== 'string') return { error: 'no metadata.namespace and name' };
  if (!isRecord(spec) || !Array.isArray(spec.ports)) return { error: 'spec.ports is not a list' };
  const views = new Map<string, Map<string, number>>();
  const firstChoices = new Map<string, Map<string, string>>();
  for (const p of spec.ports) {
    if (!isRecord(p) || typeof p.port !== 'string' || !isRecord(p.weights)) return { error: 'a spec.ports entry is not { port, weights: {...} }' };
    const m = new Map<string, number>();
    for (const [b, w] of Object.entries(p.weights)) {
      if (typeof w !== 'number' || !Number.isInteger(w) || w < damping.minWeight || w > damping.maxWeight) {
        return { error: `port ${p.port}: weight of ${b} is ${JSON.stringify(w)}, want an integer in ${damping.minWeight}..${damping.maxWeight}` };
      }
      m.set(b, w);
    }
    const vk = `${meta.namespace}/${meta.name}/${p.port}`;
    views.set(vk, m);
    if (p.firstChoices === undefined) continue;
    if (!isRecord(p.firstChoices)) return { error: `port ${p.port}: firstChoices is not an object` };
    const c = new Map<string, string>();
    for (const [node, b] of Object.entries(p.firstChoices)) {
      if (typeof b !== 'string' || !m.has(b)) return { error: `port ${p.port}: first choice of ${node} is ${JSON.stringify(b)}, not a backend of its weights` };
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

/** The weights' outcome for one sync. */
export interface ClusterWeightsResult {
  table: DesiredTable;
  problems: Problem[];
  /** When the view's absence turns into a ClusterViewStale problem (ms), if it is coming. */
  nextAt?: number;
}

/**
 * The node's side of the view: remembers the published weights and whether the view is alive, and
 * rewrites the weights of opted-in virtual servers in the table the planner gets (base weight ×
 * cluster weight; a backend the object does not name yet gets maxWeight, as the aggregator's
 * initial view does). While the view is not alive, or before anything was published, local
 * weights are used, with a ClusterViewStale problem once the view has been missing for staleMs.
 * O(changed + opted-in virtual servers) per call.
 */
export class ClusterWeights {
  private readonly published = new Map<string, Map<string, number>>();
  /** Per view key, node -> first choice, as published. */
  private readonly choices = new Map<string, Map<string, string>>();
  /** Per Service, the nodes that report it, when the aggregator named them. */
  private readonly reporters = new Map<string, ReadonlySet<string>>();
  /** Opted-in virtual server key -> its view key. */
  private readonly opted = new Map<string, string>();
  private readonly out = new Map<string, DesiredVirtualServer>();
  /**
   * Alive until shown otherwise: a restarted node applies what is published at once (its first
   * sync then changes nothing), and falls back only once the view is seen stale.
   */
  private alive = true;
  /** Since when the view is missing (not alive), ms; undefined while alive. */
  private missingSince: number | undefined;
  private readonly invalid = new Map<string, string>();

  /** The problems of the last apply (the sync loop reports them with its own). */
  lastProblems: readonly Problem[] = [];

  /**
   * `staleMs`: how long the view may be missing before a ClusterViewStale problem; `weighOf`: a
   * scheduler plugin's own weigh(), by plugin name (plugins/types.ts), if it has one; `nodeName`:
   * this node, whose first choice (first-choice.ts) it applies.
   */
  constructor(private readonly staleMs = 30_000, private readonly damping: DampingConfig = DEFAULT_DAMPING,
    private readonly weighOf: (plugin: string) => Weigh | undefined = () => undefined, private readonly nodeName = '') {}

  /** Weights published for a Service (parsed); replaces its ports' previous weights and first choices. */
  publish(service: string, views: ReadonlyMap<string, ReadonlyMap<string, number>>,
    firstChoices: ReadonlyMap<string, ReadonlyMap<string, string>> = new Map(), reporters?: readonly string[]): void {
    this.forget(service);
    if (reporters) this.reporters.set(service, new Set(reporters));
    for (const [k, w] of views) {
      this.published.set(k, new Map(w));
      const c = firstChoices.get(k);
      if (c) this.choices.set(k, new Map(c));
    }
  }

  /** A published object that failed its checks: local weights for that Service, with a problem. */
  refuse(service: string, error: string): void {
    this.forget(service);
    this.invalid.set(service, error);
  }

  /** The Service's weights object is gone. */
  forget(service: string): void {
    for (const k of [...this.published.keys()]) if (k.startsWith(`${service}/`)) this.published.delete(k);
    for (const k of [...this.choices.keys()]) if (k.startsWith(`${service}/`)) this.choices.delete(k);
    this.reporters.delete(service);
    this.invalid.delete(service);
  }

  /** Whether an aggregator is alive (the edge watches the Lease); `now` starts the missing clock. */
  setAlive(alive: boolean, now: number): void {
    if (alive === this.alive && (alive || this.missingSince !== undefined)) return;
    this.alive = alive;
    this.missingSince = alive ? undefined : (this.missingSince ?? now);
  }

  get isAlive(): boolean {
    return this.alive;
  }

  /** Opted-in virtual servers by key, with their view keys (for the reporter). */
  optedIn(): ReadonlyMap<string, string> {
    return this.opted;
  }

  /**
   * The opted-in virtual servers this node reports, with their view keys: what the reporter reads,
   * one by one. A Service whose published weights name its reporters is read only by them.
   */
  *optedServers(): Iterable<{ vs: DesiredVirtualServer['vs']; viewKey: string }> {
    for (const [key, viewKey] of this.opted) {
      const e = this.out.get(key);
      if (e && this.reports(viewKey)) yield { vs: e.vs, viewKey };
    }
  }

  /** Whether this node reports a Service port: yes unless the published weights name reporters without it. */
  reports(viewKey: string): boolean {
    const r = this.reporters.get(viewKey.slice(0, viewKey.lastIndexOf('/')));
    return !r || r.has(this.nodeName);
  }

  /** The reporters last published for a Service (the leader compares before writing). */
  publishedReportersOf(service: string): ReadonlySet<string> | undefined {
    return this.reporters.get(service);
  }

  /**
   * The real servers with the view's weights: the plugin's weigh() when it has one (given frozen
   * copies; its answer checked), else base × cluster weight; then this node's first choice made
   * its idle choice as its scheduler allows (tiltFirstChoice).
   */
  private weigh(e: DesiredVirtualServer, w: ReadonlyMap<string, number>, firstChoice: string | undefined, service: string, problems: Problem[]): RealServer[] {
    const dests = this.weighed(e, w, firstChoice, service, problems);
    if (firstChoice === undefined) return dests;
    const tilted = tiltFirstChoice(dests.map((rs) => rs.weight), dests.findIndex((rs) => realServerKey(rs) === firstChoice), MAX_WEIGHT, e.vs.scheduler);
    return dests.map((rs, i) => (tilted[i] === rs.weight ? rs : { ...rs, weight: tilted[i]! }));
  }

  private weighed(e: DesiredVirtualServer, w: ReadonlyMap<string, number>, firstChoice: string | undefined, service: string, problems: Problem[]): RealServer[] {
    const byDefault = () => e.dests.map((rs) => ({ ...rs, weight: clusterWeight(rs.weight, w.get(realServerKey(rs)) ?? this.damping.maxWeight) }));
    const weigh = this.weighOf(e.origin.plugin);
    if (!weigh) return byDefault();
    try {
      const view = { weights: new Map(w), ...(firstChoice === undefined ? {} : { firstChoice }) };
      const answer: unknown = weigh(Object.freeze(e.dests.map((rs) => Object.freeze({ address: rs.address, port: rs.port, weight: rs.weight }))), Object.freeze(view));
      if (!Array.isArray(answer) || answer.length !== e.dests.length || answer.some((x) => !Number.isInteger(x) || x < 0 || x > MAX_WEIGHT)) {
        throw new Error(`weigh() must return ${e.dests.length} integers in 0..${MAX_WEIGHT}, got ${JSON.stringify(answer)?.slice(0, 120)}`);
      }
      return e.dests.map((rs, i) => ({ ...rs, weight: answer[i] as number }));
    } catch (err) {
      if (!problems.some((p) => p.service === service && p.reason === 'PluginWeighFailed')) {
        problems.push({ service, reason: 'PluginWeighFailed', message: `plugin ${e.origin.plugin}: ${(err as Error).message}; weights × the view's` });
      }
      return byDefault();
    }
  }

  /** The weights last published for a view key, live or not (a new leader starts from them). */
  publishedOf(viewKey: string): ReadonlyMap<string, number> | undefined {
    return this.published.get(viewKey);
  }

  /** The first choices last published for a view key (a new leader keeps them where it can). */
  publishedChoicesOf(viewKey: string): ReadonlyMap<string, string> | undefined {
    return this.choices.get(viewKey);
  }

  /** The weights in force for a view key (undefined: local weights). */
  weightsOf(viewKey: string): ReadonlyMap<string, number> | undefined {
    return this.alive ? this.published.get(viewKey) : undefined;
  }

  /**
   * Rewrites the opted-in entries; adds to `changed` every key whose weights moved although its
   * desired entry did not (new weights, the view dying or coming back), so the planner plans it.
   */
  apply(table: DesiredTable, changed: Set<string>, now: number): ClusterWeightsResult {
    const { staleMs } = this;
    for (const key of changed) {
      const e = table.get(key);
      if (e?.clusterBalance) this.opted.set(key, viewKeyOf(e));
      else { this.opted.delete(key); this.out.delete(key); }
    }
    for (const key of [...this.opted.keys()]) if (!table.has(key)) { this.opted.delete(key); this.out.delete(key); }
    const problems: Problem[] = [];
    const services = new Set<string>();
    for (const [key, vk] of this.opted) {
      const e = table.get(key)!;
      const service = `${e.origin.namespace}/${e.origin.name}`;
      services.add(service);
      const w = this.alive ? this.published.get(vk) : undefined;
      // The dealt first choice, else (none dealt to this node: a large cluster, or not yet) its own.
      const first = w ? this.choices.get(vk)?.get(this.nodeName) ?? localFirstChoice(this.nodeName, vk, w) : undefined;
      const dests = w ? this.weigh(e, w, first, service, problems) : e.dests;
      const before = this.out.get(key);
      const moved = !before || before.dests.length !== dests.length || before.dests.some((rs, i) => rs.weight !== dests[i]!.weight);
      if (moved && before) changed.add(key);
      this.out.set(key, { ...e, dests });
    }
    for (const service of services) {
      const invalid = this.invalid.get(service);
      if (invalid) problems.push({ service, reason: 'ClusterWeightsInvalid', message: `the published IPVSServiceWeights was refused: ${invalid}; local weights` });
      else if (this.missingSince !== undefined && now - this.missingSince >= staleMs) {
        problems.push({ service, reason: 'ClusterViewStale', message: `no live cluster load view for ${Math.round((now - this.missingSince) / 1000)} s; local weights` });
      }
    }
    this.lastProblems = problems;
    const result: ClusterWeightsResult = { table: this.out.size ? overlayTable(table, this.out) : table, problems };
    if (this.opted.size && this.missingSince !== undefined && now < this.missingSince + staleMs) result.nextAt = this.missingSince + staleMs;
    return result;
  }
}

/** A plugin's weigh() (plugins/types.ts), as ClusterWeights calls it. */
export type Weigh = (endpoints: readonly { address: string; port: number; weight: number }[],
  view: { weights: ReadonlyMap<string, number>; firstChoice?: string }) => number[];

/** A real server's weight under a cluster weight: base × cluster (0 stays 0: a quiesced endpoint). */
export function clusterWeight(base: number, cluster: number): number {
  if (base <= 0) return 0;
  return Math.min(MAX_WEIGHT, base * cluster);
}

/** One backend's line in `status --service`: the cluster's view of it. */
export interface BackendShare {
  port: string;
  backend: string;
  weight?: number;
  estimateSeconds?: number;
  active: number;
  conns: number;
  /** Nodes whose report names this backend. */
  nodes: number;
  /** Nodes dealt this backend as their first choice (first-choice.ts); absent when none were dealt. */
  firstOf?: number;
}

/**
 * Each backend of a Service across the cluster, from every node's report and the published
 * weights: Σ active and Σ new connections (since each node added it), and the weight in force.
 */
export function clusterShares(service: string, reports: readonly unknown[], weights: unknown): BackendShare[] {
  const out = new Map<string, BackendShare>();
  const line = (port: string, backend: string) => {
    const k = `${port} ${backend}`;
    const l = out.get(k) ?? { port, backend, active: 0, conns: 0, nodes: 0 };
    out.set(k, l);
    return l;
  };
  for (const r of reports) {
    const parsed = parseReportObject(r);
    if ('error' in parsed) continue;
    for (const [vk, rep] of parsed.reports) {
      if (!vk.startsWith(`${service}/`)) continue;
      for (const b of rep.backends) {
        if (typeof b?.backend !== 'string') continue;
        const l = line(vk.slice(service.length + 1), b.backend);
        l.active += Number(b.active) || 0;
        l.conns += Number(b.conns) || 0;
        l.nodes++;
      }
    }
  }
  const spec = isRecord(weights) && isRecord(weights.spec) ? weights.spec : undefined;
  for (const p of Array.isArray(spec?.ports) ? spec.ports : []) {
    if (!isRecord(p) || typeof p.port !== 'string') continue;
    for (const [b, w] of Object.entries(isRecord(p.weights) ? p.weights : {})) if (typeof w === 'number') line(p.port, b).weight = w;
    for (const [b, e] of Object.entries(isRecord(p.estimates) ? p.estimates : {})) if (typeof e === 'number') line(p.port, b).estimateSeconds = e;
    if (isRecord(p.firstChoices)) {
      for (const b of Object.keys(isRecord(p.weights) ? p.weights : {})) line(p.port, b).firstOf = 0;
      for (const b of Object.values(p.firstChoices)) if (typeof b === 'string') { const l = line(p.port, b); l.firstOf = (l.firstOf ?? 0) + 1; }
    }
  }
  return [...out.values()].sort((a, b) => (a.port === b.port ? (a.backend < b.backend ? -1 : 1) : a.port < b.port ? -1 : 1));
}

/** `status --service`'s table: one line per port and backend, with its share of the cluster's new connections. */
export function renderShares(service: string, shares: readonly BackendShare[], leader: string | undefined): string {
  const total = new Map<string, number>();
  for (const s of shares) total.set(s.port, (total.get(s.port) ?? 0) + s.conns);
  const lines = [`${service}: cluster load view${leader ? ` (weights from ${leader})` : ' (no weights published: local weights)'}`,
    `${'PORT'.padEnd(10)} ${'BACKEND'.padEnd(24)} ${'WEIGHT'.padStart(6)} ${'EST ms'.padStart(8)} ${'ACTIVE'.padStart(7)} ${'CONNS'.padStart(10)} ${'SHARE'.padStart(7)} ${'NODES'.padStart(5)} ${'FIRST'.padStart(5)}`];
  for (const s of shares) {
    const t = total.get(s.port) ?? 0;
    lines.push(`${(s.port || '-').padEnd(10)} ${s.backend.padEnd(24)} ${String(s.weight ?? '-').padStart(6)} ${(s.estimateSeconds === undefined ? '-' : (s.estimateSeconds * 1000).toFixed(0)).padStart(8)} ` +
      `${String(s.active).padStart(7)} ${String(s.conns).padStart(10)} ${(t ? `${((100 * s.conns) / t).toFixed(1)}%` : '-').padStart(7)} ${String(s.nodes).padStart(5)} ` +
      `${String(s.firstOf ?? '-').padStart(5)}`);
  }
  if (shares.length === 0) lines.push('(no node reports this Service: is it annotated ipvs-operator.io/balance: cluster?)');
  return lines.join('\n');
}
