// KubeSource: Services and EndpointSlices of all namespaces, this node's Node and the
// IPVSProxyConfig "default", from client-node's informers (ListWatch), each restarted with
// backoff when it stops (src/kube/informer.ts explains what client-node does by itself).
//
// - The config is validated with the CRD's schema (src/config/); an invalid one is not sent: it
//   is logged, reported as a Warning Event on the IPVSProxyConfig (once per distinct error) and
//   returned by problems(), and the last valid config stays in force. A deleted config sends a
//   config delete carrying defaultProxyConfig. Without the CRD installed the defaults apply.
// - Objects from the initial list come from client-node's generated API (typed: timestamps are
//   Dates), later ones from the watch (plain JSON: timestamps are strings).
// - While any informer is down, healthy() is false; nothing is sent until it is back.
import {
  CoreV1Api, CustomObjectsApi, DiscoveryV1Api, type KubeConfig, type KubernetesListObject, type KubernetesObject,
  ListWatch, type V1EndpointSlice, type V1Node, type V1Service, Watch,
} from '@kubernetes/client-node';
import { validateConfig } from '../config/load.js';
import { CONFIG_GROUP, CONFIG_NAME, CONFIG_VERSION, type ConfigResult } from '../config/schema.js';
import { type Problem, type ProxyConfig, defaultProxyConfig } from '../desired/types.js';
import { type LogFn, noLog } from '../source/log.js';
import type { Source, SourceEvent, SourceHealth } from '../source/types.js';
import { CONFIG_OBJECT, KubeEventSink, firstLine } from './events.js';
import { type Backoff, type InformerHandlers, RestartingInformer, defaultBackoff } from './informer.js';

export interface KubeSourceOptions {
  kubeConfig: KubeConfig;
  /** This node's name: its Node object is watched (field selector metadata.name). */
  nodeName: string;
  log?: LogFn;
  /** Restart delays of stopped informers (default 1 s doubling to 30 s, ±10 %). */
  backoff?: Partial<Backoff>;
  /** Where invalid-config Events go (default: a KubeEventSink on kubeConfig). */
  configEvents?: Pick<KubeEventSink, 'report'>;
  /** The source's own problems (an invalid config), the whole current list, on every change of it. */
  onProblems?: (problems: readonly Problem[]) => void;
  /** Config validation (default: the CRD schema's). */
  validate?: (obj: unknown) => ConfigResult;
}

const CONFIG_PATH = `/apis/${CONFIG_GROUP}/${CONFIG_VERSION}/ipvsproxyconfigs`;

/** The Kubernetes API as a Source (see the file comment). */
export class KubeSource implements Source {
  private readonly informers: RestartingInformer<KubernetesObject>[] = [];
  private readonly log: LogFn;
  private readonly configEvents: Pick<KubeEventSink, 'report'>;
  private readonly validate: (obj: unknown) => ConfigResult;
  private onEvent: ((e: SourceEvent) => void) | undefined;
  private lastConfig: string | undefined;
  private configProblems: Problem[] = [];
  private started = false;
  private stopped = false;

  constructor(private readonly opts: KubeSourceOptions) {
    this.log = opts.log ?? noLog;
    this.validate = opts.validate ?? validateConfig;
    this.configEvents = opts.configEvents ?? new KubeEventSink({ kubeConfig: opts.kubeConfig, nodeName: opts.nodeName, log: this.log });
    const kc = opts.kubeConfig;
    const backoff = { ...defaultBackoff, ...opts.backoff };
    const core = kc.makeApiClient(CoreV1Api);
    const discovery = kc.makeApiClient(DiscoveryV1Api);
    const custom = kc.makeApiClient(CustomObjectsApi);
    const nodeSelector = `metadata.name=${opts.nodeName}`;
    const configSelector = `metadata.name=${CONFIG_NAME}`;
    const add = <T extends KubernetesObject>(name: string, path: string, list: () => Promise<KubernetesListObject<T>>,
      handlers: InformerHandlers<T>, fieldSelector?: string, optional = false) => {
      const lw = new ListWatch<T>(path, new Watch(kc), list, false, undefined, fieldSelector);
      this.informers.push(new RestartingInformer<T>(name, lw, handlers, this.log, backoff, optional) as unknown as RestartingInformer<KubernetesObject>);
    };
    add<V1Service>('services', '/api/v1/services', () => core.listServiceForAllNamespaces(), {
      upsert: (object) => this.emit({ kind: 'service', type: 'upsert', object }),
      delete: (object) => this.emit({ kind: 'service', type: 'delete', object }),
    });
    add<V1EndpointSlice>('endpointslices', '/apis/discovery.k8s.io/v1/endpointslices', () => discovery.listEndpointSliceForAllNamespaces(), {
      upsert: (object) => this.emit({ kind: 'endpointslice', type: 'upsert', object }),
      delete: (object) => this.emit({ kind: 'endpointslice', type: 'delete', object }),
    });
    add<V1Node>('node', '/api/v1/nodes', () => core.listNode({ fieldSelector: nodeSelector }), {
      upsert: (object) => this.emit({ kind: 'node', type: 'upsert', object }),
      delete: (object) => this.emit({ kind: 'node', type: 'delete', object }),
    }, nodeSelector);
    add<KubernetesObject>('ipvsproxyconfig', CONFIG_PATH,
      () => custom.listClusterCustomObject({ group: CONFIG_GROUP, version: CONFIG_VERSION, plural: 'ipvsproxyconfigs', fieldSelector: configSelector }) as Promise<KubernetesListObject<KubernetesObject>>,
      { upsert: (o) => this.configChanged(o), delete: () => this.configDeleted() }, configSelector, true);
  }

  /**
   * Starts every informer and resolves once each delivered its first list (an unreachable API is
   * retried with backoff meanwhile: the promise waits). Resolves early if stop() is called.
   */
  async start(onEvent: (e: SourceEvent) => void): Promise<void> {
    if (this.started) throw new Error('KubeSource already started');
    this.started = true;
    this.onEvent = onEvent;
    for (const i of this.informers) i.start();
    await Promise.all(this.informers.map((i) => i.synced()));
  }

  private healthSeen: { ok: boolean; since: number } = { ok: false, since: Date.now() };

  /** healthy(), with the time it last changed (tracked when asked; a later change refines it). */
  health(): SourceHealth {
    const ok = this.healthy();
    if (ok !== this.healthSeen.ok) this.healthSeen = { ok, since: Date.now() };
    return { ...this.healthSeen };
  }

  healthy(): boolean {
    return this.started && !this.stopped && this.informers.every((i) => i.up);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.informers.map((i) => i.stop()));
  }

  /** The source's own problems as last found (an invalid IPVSProxyConfig). */
  problems(): readonly Problem[] {
    return this.configProblems;
  }

  private emit(e: SourceEvent): void {
    if (!this.stopped) this.onEvent?.(e);
  }

  private configChanged(obj: KubernetesObject): void {
    const r = this.validate(obj);
    if (!r.ok) {
      this.log('error', 'IPVSProxyConfig default is invalid; the last valid configuration stays in force', { errors: r.errors });
      this.setConfigProblems([{ service: '', reason: 'InvalidConfig', message: `invalid IPVSProxyConfig, the last valid configuration stays in force: ${r.errors}` }]);
      return;
    }
    this.setConfigProblems([]);
    this.sendConfig('upsert', r.config);
  }

  private configDeleted(): void {
    this.setConfigProblems([]);
    this.sendConfig('delete', { ...defaultProxyConfig });
  }

  /** Sends a config unless it equals the last one sent (a relist or a metadata-only change). */
  private sendConfig(type: 'upsert' | 'delete', config: ProxyConfig): void {
    const text = JSON.stringify(config);
    if (text === this.lastConfig) return;
    this.lastConfig = type === 'delete' ? undefined : text;
    this.emit({ kind: 'config', type, config });
  }

  private setConfigProblems(problems: Problem[]): void {
    const same = problems.length === this.configProblems.length && problems.every((p, i) => p.message === this.configProblems[i]?.message);
    this.configProblems = problems;
    if (!same) this.opts.onProblems?.(problems);
    // Deduplicated by the sink; an empty report lets a problem that comes back be posted again.
    this.configEvents.report(problems, new Map()).catch((e: unknown) =>
      this.log('warn', 'posting the invalid-config Event failed', { object: `${CONFIG_OBJECT.kind}/${CONFIG_OBJECT.name}`, error: firstLine(e) }));
  }
}
