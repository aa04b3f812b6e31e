// Cluster load view, the node's side (issue 27): which Services opt in, what a node reports, and
// how it applies the published weights to its desired table. pure: no I/O; the clock is passed in.
// Weights steer new connections only; a stale or missing view means local weights. The API
// objects are view-objects.ts, `status --service` shares.ts; docs/balance.md tells the design.
import type { DesiredTable, DesiredVirtualServer, Problem } from '../model/desired.js';
import { formatHostPort } from '../model/ipvs.js';
import type { BackendCounters } from './estimate.js';
import { DEFAULT_DAMPING, type DampingConfig } from './damping.js';
import { RAMPABLE_SCHEDULERS } from './slow-start.js';
import { overlayTable } from './overlay.js';
import { localFirstChoice } from './first-choice.js';
import { PublishedWeights } from './published-weights.js';
import { OptedIn } from './opted-in.js';
import { type Weigh, type WeighOptions, weighDests } from './weigh.js';

// Moved out; still exported here for the kube edge and `status`, which import them from this file.
export { REPORTS_PATH, VIEW_GROUP_VERSION, WEIGHTS_PATH, type ParsedWeights, type PortWeights, parseReportObject,
  parseWeightsObject, reportObject, weightsObject } from './view-objects.js';
export { type BackendShare, clusterShares, renderShares } from './shares.js';
export { type Weigh, clusterWeight } from './weigh.js';

/** `ipvs-operator.io/balance: cluster` opts a Service into the cluster load view; `local` (the default) does not. */
export const BALANCE_ANNOTATION = 'ipvs-operator.io/balance';
export const BALANCE_MODES = ['local', 'cluster'] as const;

/** The Service's balance mode; an invalid value is an InvalidBalance problem and means `local`. */
export function chooseBalance(
  serviceId: string, annotations: Record<string, unknown> | undefined, problems: Problem[],
): 'local' | 'cluster' {
  const raw = annotations?.[BALANCE_ANNOTATION];
  if (raw === undefined || raw === null || raw === '') return 'local';
  if (raw === 'local' || raw === 'cluster') return raw;
  const message = `${BALANCE_ANNOTATION}: ${JSON.stringify(raw)} is not one of ${BALANCE_MODES.join(', ')}; `
    + 'balancing locally';
  problems.push({ service: serviceId, reason: 'InvalidBalance', message });
  return 'local';
}

/** Why cluster weights do not apply to a kernel scheduler (the same schedulers as slow start: weights as shares). */
export function clusterBalanceInapplicable(scheduler: string): string | undefined {
  return RAMPABLE_SCHEDULERS.has(scheduler) ? undefined
    : `scheduler ${scheduler} does not use weights as shares (use wrr, wlc, sed, nq or twos), `
      + 'so cluster weights cannot steer it';
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
export function countersByView(
  read: Iterable<{ viewKey: string; dests: readonly KernelDest[] }>,
): Map<string, BackendCounters[]> {
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

/** The weights' outcome for one sync. */
export interface ClusterWeightsResult {
  table: DesiredTable;
  problems: Problem[];
  /** When the view's absence turns into a ClusterViewStale problem (ms), if it is coming. */
  nextAt?: number;
}

/** What ClusterWeights.apply must redo, kept between calls. */
interface Track {
  /** Weigh every opted-in entry again (the first call; the view came or went). */
  all: boolean;
  /** Services published, refused or forgotten since: their entries are weighed again. */
  services: Set<string>;
  /** The problem list may differ from the last one. */
  problems: boolean;
  /** Whether the last call found the view stale. */
  stale: boolean;
  /** Per opted-in key, the problems weighing it gave (none: absent). */
  weighed: Map<string, Problem[]>;
}

/**
 * The node's side of the view: remembers the published weights and whether the view is alive, and
 * rewrites the weights of opted-in virtual servers in the table the planner gets (base weight ×
 * cluster weight; a backend the object does not name yet gets maxWeight, as the aggregator's
 * initial view does). While the view is not alive, or before anything was published, local
 * weights are used, with a ClusterViewStale problem once the view has been missing for staleMs.
 * Incremental: a call weighs again only the changed keys and those of Services published since,
 * O(them); all opted-in ones when the view came or went, and the problem list when it may differ.
 */
export class ClusterWeights {
  /** What the aggregator last published (published-weights.ts). */
  private readonly published = new PublishedWeights();
  /** Opted-in virtual server keys -> their view keys (opted-in.ts). */
  private readonly opted = new OptedIn();
  /** What changed since the last apply, and each key's problems from weighing (see Track). */
  private readonly track: Track = { all: true, services: new Set(), problems: true, stale: false, weighed: new Map() };
  private readonly out = new Map<string, DesiredVirtualServer>();
  /**
   * Alive until shown otherwise: a restarted node applies what is published at once (its first
   * sync then changes nothing), and falls back only once the view is seen stale.
   */
  private alive = true;
  /** Since when the view is missing (not alive), ms; undefined while alive. */
  private missingSince: number | undefined;
  /** The constructor's options: staleMs and nodeName, and what weighing needs (weigh.ts). */
  private readonly o: WeighOptions & { staleMs: number; nodeName: string };

  /** The problems of the last apply (the sync loop reports them with its own). */
  lastProblems: readonly Problem[] = [];

  /**
   * `staleMs`: how long the view may be missing before a ClusterViewStale problem; `weighOf`: a
   * scheduler plugin's own weigh(), by plugin name (plugins/types.ts), if it has one; `nodeName`:
   * this node, whose first choice (first-choice.ts) it applies.
   */
  constructor(staleMs = 30_000, damping: DampingConfig = DEFAULT_DAMPING,
    weighOf: (plugin: string) => Weigh | undefined = () => undefined, nodeName = '') {
    this.o = { staleMs, damping, weighOf, nodeName };
  }

  /** Weights published for a Service (parsed); replaces its ports' previous weights and first choices. */
  publish(service: string, views: ReadonlyMap<string, ReadonlyMap<string, number>>,
    firstChoices: ReadonlyMap<string, ReadonlyMap<string, string>> = new Map(), reporters?: readonly string[]): void {
    this.published.publish(service, views, firstChoices, reporters);
    this.touch(service);
  }

  /** A Service's published object changed: its keys are weighed again at the next apply. */
  private touch(service: string): void {
    this.track.services.add(service);
    this.track.problems = true;
  }

  /** A published object that failed its checks: local weights for that Service, with a problem. */
  refuse(service: string, error: string): void {
    this.published.refuse(service, error);
    this.touch(service);
  }

  /** The Service's weights object is gone. */
  forget(service: string): void {
    this.published.forget(service);
    this.touch(service);
  }

  /** Whether an aggregator is alive (the edge watches the Lease); `now` starts the missing clock. */
  setAlive(alive: boolean, now: number): void {
    if (alive === this.alive && (alive || this.missingSince !== undefined)) return;
    if (alive !== this.alive) this.track.all = true;
    this.alive = alive;
    this.missingSince = alive ? undefined : (this.missingSince ?? now);
  }

  get isAlive(): boolean {
    return this.alive;
  }

  /** Opted-in virtual servers by key, with their view keys (for the reporter). */
  optedIn(): ReadonlyMap<string, string> {
    return this.opted.byKey;
  }

  /**
   * The opted-in virtual servers this node reports, with their view keys: what the reporter reads,
   * one by one. A Service whose published weights name its reporters is read only by them.
   */
  *optedServers(): Iterable<{ vs: DesiredVirtualServer['vs']; viewKey: string }> {
    for (const [key, viewKey] of this.opted.byKey) {
      const e = this.out.get(key);
      if (e && this.reports(viewKey)) yield { vs: e.vs, viewKey };
    }
  }

  /** Whether this node reports a Service port: yes unless the published weights name reporters without it. */
  reports(viewKey: string): boolean {
    const r = this.published.reporters.get(viewKey.slice(0, viewKey.lastIndexOf('/')));
    return !r || r.has(this.o.nodeName);
  }

  /** The reporters last published for a Service (the leader compares before writing). */
  publishedReportersOf(service: string): ReadonlySet<string> | undefined {
    return this.published.reporters.get(service);
  }

  /** The weights last published for a view key, live or not (a new leader starts from them). */
  publishedOf(viewKey: string): ReadonlyMap<string, number> | undefined {
    return this.published.weights.get(viewKey);
  }

  /** The first choices last published for a view key (a new leader keeps them where it can). */
  publishedChoicesOf(viewKey: string): ReadonlyMap<string, string> | undefined {
    return this.published.choices.get(viewKey);
  }

  /** The weights in force for a view key (undefined: local weights). */
  weightsOf(viewKey: string): ReadonlyMap<string, number> | undefined {
    return this.alive ? this.published.weights.get(viewKey) : undefined;
  }

  /**
   * Rewrites the opted-in entries; adds to `changed` every key whose weights moved although its
   * desired entry did not (new weights, the view dying or coming back), so the planner plans it.
   * `changed` must hold every key whose desired entry appeared, changed or went since the last call.
   */
  apply(table: DesiredTable, changed: Set<string>, now: number): ClusterWeightsResult {
    const t = this.track;
    const again = new Set<string>();
    for (const key of changed) {
      const e = table.get(key);
      if (e?.clusterBalance) {
        if (this.opted.set(key, viewKeyOf(e), `${e.origin.namespace}/${e.origin.name}`)) t.problems = true;
        again.add(key);
      } else if (this.opted.delete(key)) {
        this.out.delete(key);
        t.weighed.delete(key);
        t.problems = true;
      }
    }
    // Keys whose entry did not change but whose weights may have: in opt-in order, as `changed` gets them.
    const others = t.all ? [...this.opted.byKey.keys()]
      : this.opted.inOrder([...t.services].flatMap((s) => [...this.opted.keysOf(s)]).filter((k) => !again.has(k)));
    for (const key of [...again, ...others]) {
      if (this.weigh(key, table.get(key)!) && !again.has(key)) changed.add(key);
    }
    const stale = this.missingSince !== undefined && now - this.missingSince >= this.o.staleMs;
    // A stale problem's text says for how long: while stale, the list is assembled every time.
    if (t.all || t.problems || stale || stale !== t.stale) this.lastProblems = this.assembleProblems(stale, now);
    [t.all, t.problems, t.stale] = [false, false, stale];
    t.services.clear();
    const result: ClusterWeightsResult = {
      table: this.out.size ? overlayTable(table, this.out) : table, problems: this.lastProblems as Problem[],
    };
    if (this.opted.byKey.size && this.missingSince !== undefined && now < this.missingSince + this.o.staleMs) {
      result.nextAt = this.missingSince + this.o.staleMs;
    }
    return result;
  }

  /** Weighs one opted-in entry into `out`; whether its weights moved (it was weighed before). */
  private weigh(key: string, e: DesiredVirtualServer): boolean {
    const [vk, node] = [this.opted.byKey.get(key)!, this.o.nodeName];
    const w = this.alive ? this.published.weights.get(vk) : undefined;
    const problems: Problem[] = [];
    // The dealt first choice, else (none dealt to this node: a large cluster, or not yet) its own.
    const first = w ? this.published.choices.get(vk)?.get(node) ?? localFirstChoice(node, vk, w) : undefined;
    const dests = w ? weighDests(this.o, e, w, first, this.opted.serviceOf(key)!, problems) : e.dests;
    if (problems.length || this.track.weighed.has(key)) this.track.problems = true;
    if (problems.length) this.track.weighed.set(key, problems);
    else this.track.weighed.delete(key);
    const before = this.out.get(key);
    this.out.set(key, { ...e, dests });
    return !!before
      && (before.dests.length !== dests.length || before.dests.some((rs, i) => rs.weight !== dests[i]!.weight));
  }

  /** Every problem: each entry's from weighing in opt-in order, then each Service's (refused, stale). */
  private assembleProblems(stale: boolean, now: number): Problem[] {
    const problems: Problem[] = [];
    const services = new Set<string>();
    for (const key of this.opted.byKey.keys()) {
      problems.push(...this.track.weighed.get(key) ?? []);
      services.add(this.opted.serviceOf(key)!);
    }
    for (const service of services) {
      const invalid = this.published.invalid.get(service);
      if (invalid) {
        const message = `the published IPVSServiceWeights was refused: ${invalid}; local weights`;
        problems.push({ service, reason: 'ClusterWeightsInvalid', message });
      } else if (stale) {
        const seconds = Math.round((now - this.missingSince!) / 1000);
        const message = `no live cluster load view for ${seconds} s; local weights`;
        problems.push({ service, reason: 'ClusterViewStale', message });
      }
    }
    return problems;
  }
}
