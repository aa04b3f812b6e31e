// KubeSource: Services and EndpointSlices of all namespaces, this node's Node and the
// IPVSProxyConfig "default", each listed and watched by its own Reflector (reflector.ts), as
// SourceEvents. Services and EndpointSlices are trimmed before they are cached; the config passes
// the gate the files source uses too (src/source/config-gate.ts). What it sends when, what an
// invalid config does, and its health: docs/kube-client.md, "The kube source".
import type { KubernetesObject, V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { validateConfig } from '../config/load.js';
import { CONFIG_GROUP, CONFIG_NAME, CONFIG_VERSION, type ConfigResult } from '../config/schema.js';
import { type Problem } from '../desired/types.js';
import { ConfigGate } from '../source/config-gate.js';
import { type Log, noLog } from '../util/log.js';
import type { Source, SourceEvent, SourceHealth } from '../source/types.js';
import { CONFIG_OBJECT, KubeEventSink, firstLine } from './events.js';
import type { KubeClient } from './client.js';
import { type Trim, trimEndpointSlice, trimService } from '../source/trim.js';
import { type Backoff, type Healing, defaultBackoff, defaultHealing } from './informer.js';
import { Reflector, type ReflectorHandlers } from './reflector.js';

export interface KubeSourceOptions {
  client: KubeClient;
  /** This node's name: its Node object is watched (field selector metadata.name). */
  nodeName: string;
  log?: Log;
  /** Restart delays of stopped informers (default 1 s doubling to 30 s, ±10 %). */
  backoff?: Partial<Backoff>;
  /** Periodic relist (repairs events lost on the way), default every 5 min ±10 %; 0: never. */
  relistMs?: number;
  /**
   * A watch silent this long is restarted (default 6 min; the server ends watches after
   * `watchTimeoutSeconds`, default 300).
   */
  watchIdleMs?: number;
  /** Asked of the server for every watch (timeoutSeconds, default 300): it ends them cleanly and they are re-opened. */
  watchTimeoutSeconds?: number;
  /** Longest Retry-After honoured (default 5 min). */
  maxRetryAfterMs?: number;
  /** start() rejects when the first lists did not all arrive within this (default 60 s); 0: waits for ever. */
  startTimeoutMs?: number;
  /** Objects per list request (limit/continue), default 500. */
  listPageSize?: number;
  /** The clock of health().since (default Date.now). */
  now?: () => number;
  /** Where invalid-config Events go (default: a KubeEventSink on the client). */
  configEvents?: Pick<KubeEventSink, 'report'>;
  /** The source's own problems (an invalid config), the whole current list, on every change of it. */
  onProblems?: (problems: readonly Problem[]) => void;
  /** Config validation (default: the CRD schema's). */
  validate?: (obj: unknown) => ConfigResult;
  /** A watch line or list item skipped as malformed, by resource and reason (a metric). */
  onMalformed?: (resource: string, reason: string) => void;
}

const CONFIG_PATH = `/apis/${CONFIG_GROUP}/${CONFIG_VERSION}/ipvsproxyconfigs`;

/** The Kubernetes API as a Source (see the file comment). */
export class KubeSource implements Source {
  private readonly informers: Reflector<KubernetesObject>[] = [];
  private readonly log: Log;
  /** The IPVSProxyConfig's gate, where its invalid-config Events go, and its problems now. */
  private readonly config: { gate: ConfigGate; events: Pick<KubeEventSink, 'report'>; problems: Problem[] };
  /** The event handler and the start/stop flags. */
  private readonly run: { onEvent: ((e: SourceEvent) => void) | undefined; started: boolean; stopped: boolean } = {
    onEvent: undefined, started: false, stopped: false,
  };
  private readonly now: () => number;
  private healthNow: SourceHealth;

  constructor(private readonly opts: KubeSourceOptions) {
    this.log = opts.log ?? noLog;
    this.now = opts.now ?? Date.now;
    this.healthNow = { ok: false, since: this.now(), reason: 'not started' };
    this.config = {
      gate: new ConfigGate(opts.validate ?? validateConfig),
      events: opts.configEvents ?? new KubeEventSink({ client: opts.client, nodeName: opts.nodeName, log: this.log }),
      problems: [],
    };
    const client = opts.client;
    const healing: Healing = {
      backoff: { ...defaultBackoff, ...opts.backoff },
      relistMs: opts.relistMs ?? defaultHealing.relistMs,
      idleMs: opts.watchIdleMs ?? defaultHealing.idleMs,
      watchTimeoutSeconds: opts.watchTimeoutSeconds ?? defaultHealing.watchTimeoutSeconds,
      maxRetryAfterMs: opts.maxRetryAfterMs ?? defaultHealing.maxRetryAfterMs,
    };
    const limit = opts.listPageSize ?? 500;
    const nodeSelector = `metadata.name=${opts.nodeName}`;
    const configSelector = `metadata.name=${CONFIG_NAME}`;
    const add = <T extends KubernetesObject>(name: string, path: string,
      handlers: ReflectorHandlers<T>, fieldSelector?: string, optional = false, trim?: Trim<T>) => {
      this.informers.push(new Reflector<T>({
        name, path, fieldSelector, pageSize: limit, client, handlers, trim, log: this.log, healing, optional,
        onChange: () => this.updateHealth(), onMalformed: opts.onMalformed,
      }) as unknown as Reflector<KubernetesObject>);
    };
    add<V1Service>('services', '/api/v1/services', {
      upsert: (object) => this.emit({ kind: 'service', type: 'upsert', object }),
      delete: (object) => this.emit({ kind: 'service', type: 'delete', object }),
    }, undefined, false, trimService);
    add<V1EndpointSlice>('endpointslices', '/apis/discovery.k8s.io/v1/endpointslices', {
      upsert: (object) => this.emit({ kind: 'endpointslice', type: 'upsert', object }),
      delete: (object) => this.emit({ kind: 'endpointslice', type: 'delete', object }),
    }, undefined, false, trimEndpointSlice);
    add<V1Node>('node', '/api/v1/nodes', {
      upsert: (object) => this.emit({ kind: 'node', type: 'upsert', object }),
      delete: (object) => this.emit({ kind: 'node', type: 'delete', object }),
    }, nodeSelector);
    add<KubernetesObject>('ipvsproxyconfig', CONFIG_PATH,
      { upsert: (o) => this.configChanged(o), delete: () => this.configDeleted() }, configSelector, true);
  }

  /**
   * Starts every informer and resolves once each delivered its first list (an unreachable API is
   * retried with backoff meanwhile: the promise waits, up to `startTimeoutMs`, then the source is
   * stopped and the promise rejects naming each resource not listed and its last error).
   * Resolves early if stop() is called.
   */
  async start(onEvent: (e: SourceEvent) => void): Promise<void> {
    if (this.run.started) throw new Error('KubeSource already started');
    this.run.started = true;
    this.run.onEvent = onEvent;
    this.healthNow = { ok: false, since: this.now(), reason: 'no first list yet' };
    this.updateHealth();
    for (const i of this.informers) i.start();
    const timeoutMs = this.opts.startTimeoutMs ?? 60_000;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      if (timeoutMs > 0) timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    const r = await Promise.race([Promise.all(this.informers.map((i) => i.synced())), timedOut]);
    clearTimeout(timer);
    if (r !== 'timeout') return;
    const missing = this.informers.filter((i) => !i.hasSynced).map((i) => i.reason ?? `${i.name}: no answer yet`);
    await this.stop();
    throw new Error(`the Kubernetes API at ${this.opts.client.server} did not answer every first list within `
      + `${timeoutMs / 1000} s: ${missing.join('; ')}`);
  }

  /** Since when the source is (not) healthy, and why not: the first down informer's last error. */
  health(): SourceHealth {
    return { ...this.healthNow };
  }

  healthy(): boolean {
    return this.run.started && !this.run.stopped && this.informers.every((i) => i.up);
  }

  async stop(): Promise<void> {
    this.run.stopped = true;
    this.updateHealth();
    await Promise.all(this.informers.map((i) => i.stop()));
  }

  /** Relists every informer now (what the periodic relist does); for tests and a manual resync. */
  relistNow(): void {
    for (const i of this.informers) i.relistNow();
  }

  private updateHealth(): void {
    const ok = this.healthy();
    const reason = ok ? undefined : !this.run.started ? 'not started' : this.run.stopped ? 'stopped'
      : this.informers.map((i) => i.reason).filter((r) => r !== undefined).join('; ') || 'no first list yet';
    const since = ok === this.healthNow.ok ? this.healthNow.since : this.now();
    this.healthNow = { ok, since, ...(reason ? { reason } : {}) };
  }

  /** The source's own problems as last found (an invalid IPVSProxyConfig). */
  problems(): readonly Problem[] {
    return this.config.problems;
  }

  private emit(e: SourceEvent): void {
    if (!this.run.stopped) this.run.onEvent?.(e);
  }

  private configChanged(obj: KubernetesObject): void {
    const v = this.config.gate.upsert(obj);
    if (!v.ok) {
      this.log('error', 'IPVSProxyConfig default is invalid; the last valid configuration stays in force',
        { errors: v.errors });
      this.setConfigProblems([{ service: '', reason: 'InvalidConfig',
        message: `invalid IPVSProxyConfig, the last valid configuration stays in force: ${v.errors}` }]);
      return;
    }
    this.setConfigProblems([]);
    if (v.event) this.emit(v.event);
  }

  private configDeleted(): void {
    this.setConfigProblems([]);
    const deleted = this.config.gate.delete();
    if (deleted) this.emit(deleted);
  }

  private setConfigProblems(problems: Problem[]): void {
    const same = problems.length === this.config.problems.length
      && problems.every((p, i) => p.message === this.config.problems[i]?.message);
    this.config.problems = problems;
    if (!same) this.opts.onProblems?.(problems);
    // Deduplicated by the sink; an empty report lets a problem that comes back be posted again.
    this.config.events.report(problems, new Map()).catch((e: unknown) =>
      this.log('warn', 'posting the invalid-config Event failed',
        { object: `${CONFIG_OBJECT.kind}/${CONFIG_OBJECT.name}`, error: firstLine(e) }));
  }
}
