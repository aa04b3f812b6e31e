// `run` and `explain`: where the real pieces are put together (sockets, sources, sinks, HTTP).
import { release } from 'node:os';
import type { PluginRegistry } from '../../plugins/index.js';
import { DesiredState } from '../desired/state.js';
import { defaultProxyConfig } from '../config/types.js';
import { NetlinkIpvs } from '../ipvs/client.js';
import { NetlinkConntrack } from '../conntrack/client.js';
import type { IpvsClient } from '../ipvs/types.js';
import { IptablesRestore, spawnRunner } from '../iptables/restore.js';
import { type IptablesSync, NoIptables } from '../iptables/sync.js';
import { DryRunIpvs, DryRunVipLink, dryRunRunner, printPlan } from '../sync/dry-run.js';
import { serveHttp } from '../healthcheck/http.js';
import { FileOwnershipRecord, MemoryOwnershipRecord, recordPath } from '../sync/record.js';
import { ensureIpvsModule, probeSchedulers } from '../node/kernel.js';
import { NodeTuning } from '../node/tuning.js';
import type { Log } from '../util/log.js';
import { Metrics } from '../metrics/metrics.js';
import { Operator } from '../sync/operator.js';
import { healthEdge } from '../healthcheck/health-edge.js';
import { ProxierHealthServer, ServiceHealthServers } from '../healthcheck/health-servers.js';
import { ProxierHealth } from '../healthcheck/proxier-health.js';
import { RtnlVipLink, type VipLink } from '../rtnl/vips.js';
import type { SourceEvent } from '../source/types.js';
import { ClusterWeights } from '../balance/cluster-view.js';
import { ServiceNotFoundError, renderExplain } from './explain.js';
import { type SourceSpec, iptablesPath, logSinks, wire } from './wiring.js';
import { exposedCollector } from '../util/gc.js';

export interface RunOptions {
  source: SourceSpec;
  kubeconfig: string | undefined;
  nodeName: string;
  dryRun: boolean;
  metricsAddr: string;
  /** /healthz's bound (default 2 x syncPeriod). */
  healthBoundMs?: number;
  /** Every API request's deadline (default 60 s; connect within 10 s, headers within 30 s). */
  apiTimeoutMs?: number;
  /** The cluster load view's period (0: off; default 10 s) and its Lease's namespace. */
  balancePeriodMs?: number;
  balanceNamespace?: string;
  /** K reporters per opted-in Service (0: every node). */
  balanceReporters?: number;
  /** Where the ownership record lives (sync/record.ts). */
  stateDir: string;
  iptables: boolean;
  registry: PluginRegistry;
  log: Log;
}

/** Runs the operator until SIGTERM/SIGINT; the kernel is left as it is on exit. */
export async function runOperator(o: RunOptions): Promise<number> {
  const { log } = o;
  const print = (line: string) => { process.stdout.write(`${line}\n`); };
  const hasIpvs = await ensureIpvsModule();
  if (!hasIpvs && !o.dryRun) {
    log('error', 'the kernel has no IPVS (module ip_vs): nothing to program');
    return 1;
  }
  if (!hasIpvs) print('# dry run: this kernel has no IPVS; planning against an empty IPVS table');
  const netlink = hasIpvs ? await NetlinkIpvs.open() : undefined;
  const info = netlink ? await netlink.info() : { version: 'none', versionCode: 0, connTableSize: 0 };
  const kernelRelease = release();
  const schedulerNames = [...new Set(o.registry.names().map((n) => o.registry.get(n)!.kernelScheduler))];
  // Without IPVS nothing can be probed: a dry run assumes every scheduler a plugin names.
  const schedulers = hasIpvs ? await probeSchedulers(schedulerNames) : new Set(schedulerNames);
  log('info', 'kernel', { release: kernelRelease, ipvs: info.version, schedulers: [...schedulers].sort() });

  const config = defaultProxyConfig;
  const ipvs: IpvsClient = o.dryRun ? new DryRunIpvs(netlink, print) : netlink!;
  // The sysctls, strictARP and the IPVS timeouts, as the configuration says (src/node/tuning.ts).
  const node = new NodeTuning({ ipvs, kernelRelease, stateDir: o.stateDir, dryRun: o.dryRun,
    strictArp: config.strictARP, log });
  node.setSysctls();
  const metrics = new Metrics();
  const wired = await wire(o.source, o.nodeName, o.kubeconfig, log, {
    onMalformed: (resource, reason) => metrics.source.apiMalformed.inc({ resource, reason }), timeoutMs: o.apiTimeoutMs,
  });
  const { source } = wired;
  // A dry run writes nothing anywhere: its Events and node status go to the log.
  const { events, status } = o.dryRun ? logSinks(log) : wired;
  const vips: VipLink = o.dryRun ? new DryRunVipLink(new RtnlVipLink()) : new RtnlVipLink();
  const iptables: IptablesSync = !o.iptables ? new NoIptables()
    : o.dryRun ? new IptablesRestore({ run: dryRunRunner(spawnRunner, print) }) : await iptablesPath();
  const fileRecord = new FileOwnershipRecord(recordPath(o.stateDir));
  // The cluster load view (issue 27) needs the API and writes to it: not with files, not in a dry run.
  const balancePeriodMs = o.balancePeriodMs ?? 10_000;
  const clusterWeights = wired.client && !o.dryRun && balancePeriodMs > 0
    ? new ClusterWeights(3 * balancePeriodMs, undefined, (name) => {
      const plugin = o.registry.get(name);
      return plugin?.weigh ? (endpoints, view) => plugin.weigh!(endpoints, view) : undefined;
    }, o.nodeName)
    : undefined;
  // kube-proxy's health checking (a dry run opens no port): the proxy health server on
  // healthzBindAddress, the health-check NodePorts after each sync (health-edge.ts).
  const proxierHealth = new ProxierHealth(2 * config.syncPeriod * 1000);
  const proxierServer = new ProxierHealthServer(proxierHealth, log);
  const serviceHealth = new ServiceHealthServers(() => proxierHealth.isHealthy(), log, o.nodeName);
  // The young generation emptied on the turn after the first sync (sync/rehearsal.ts): what it left
  // there is not copied out in the first change.
  const collect = exposedCollector();
  const operator = new Operator(config, {
    ipvs, vips, iptables, events, status, log,
    kernel: { release: kernelRelease, ipvsVersion: info.version, schedulers },
    registry: o.registry, nodeName: o.nodeName, metrics,
    ...(o.healthBoundMs === undefined ? {} : { healthBoundMs: o.healthBoundMs }),
    sourceHealth: () => source.health(),
    ...(netlink ? { kernelHealth: () => netlink.health(), kernelGeneration: () => netlink.familyId } : {}),
    ...(netlink && !o.dryRun ? { onKernelReset: () => node.kernelReset() } : {}),
    record: o.dryRun ? new MemoryOwnershipRecord(undefined, fileRecord) : fileRecord,
    ...(o.dryRun ? { onPlan: printPlan(print) } : { conntrack: new NetlinkConntrack() }),
    ...(o.dryRun ? {} : {
      afterSync: healthEdge({ health: proxierHealth, proxier: proxierServer, services: serviceHealth }),
    }),
    ...(clusterWeights ? { clusterWeights } : {}),
    ...(collect ? { collect } : {}),
  });
  const view = clusterWeights && wired.client
    ? new (await import('../kube/cluster-view.js')).ClusterView({
      client: wired.client, nodeName: o.nodeName, namespace: o.balanceNamespace ?? 'ipvs-operator', ipvs,
      weights: clusterWeights,
      backends: () => operator.clusterBackends(clusterWeights.optedIn()), poke: () => operator.poke(), log,
      periodMs: balancePeriodMs,
      reporters: o.balanceReporters ?? 0,
      onRejection: (reason) => metrics.balance.rejections.inc({ reason }),
      onEstimate: (viewKey, estimate, weights, imbalance) =>
        metrics.setBalanceView(viewKey, estimate, weights, imbalance),
    })
    : undefined;
  metrics.watchKernel(ipvs, () => operator.origins());

  // Signals are caught from here on: a SIGTERM while the first sync runs still ends cleanly.
  const stopped = new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      log('info', 'stopping; the kernel table is left as it is', { signal });
      resolve();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  // Healthy while starting, as kube-proxy: the proxy health server listens before the first sync;
  // so does /healthz, which turns red if the first lists take longer than the bound.
  if (!o.dryRun) void proxierServer.ensure(config.healthzBindAddress);
  const server = await serveHttp(o.metricsAddr, () => operator.health(), metrics,
    () => Object.fromEntries(operator.origins()));
  const closeAll = async () => {
    await view?.stop();
    await source.stop();
    await operator.stop();
    await Promise.all([serviceHealth.close(), proxierServer.close()]);
    await new Promise<void>((r) => server.close(() => r()));
    ipvs.close();
  };
  // A SIGTERM while waiting for the first lists ends the wait: nothing has been programmed yet.
  // While they arrive, what came is built once the events of a page are in (Operator.prepare:
  // compute only), so the first sync finds it built; it still starts only once every list is whole.
  const preparing = { listing: true, queued: false };
  // The iptables backend is detected meanwhile too (its tools run beside the listing).
  void iptables.prepare?.();
  const starting = source.start((e) => {
    if (e.kind === 'service' || e.kind === 'endpointslice') proxierHealth.queuedUpdate();
    if (e.kind === 'node') proxierHealth.syncNode(e.type === 'delete' ? undefined : e.object);
    if (e.kind === 'config' && !o.dryRun) void proxierServer.ensure(e.config.healthzBindAddress);
    operator.handle(e);
    if (e.kind === 'config') void node.configure(e.config);
    if (preparing.listing && !preparing.queued) {
      preparing.queued = true;
      setImmediate(() => {
        preparing.queued = false;
        if (!preparing.listing) return;
        try {
          operator.prepare();
        } catch (e) {
          // Only a head start: the first sync builds what is left (and says what fails).
          preparing.listing = false;
          log('warn', 'building while listing failed; the first sync builds it', { error: (e as Error).message });
        }
      });
    }
  });
  starting.catch(() => undefined); // owned below; a stop during start leaves it to settle alone
  const stoppedFirst = await Promise.race([starting.then(() => false), stopped.then(() => true)]);
  preparing.listing = false;
  if (stoppedFirst) {
    await closeAll();
    return 0;
  }
  await node.sourceStart();
  // The published weights first: the first sync programs them, not local ones it would undo.
  view?.start();
  if (view) await Promise.race([view.weightsListed(10_000), stopped]);
  operator.start();
  log('info', 'running', { node: o.nodeName, source: o.source.kind, metrics: o.metricsAddr, dryRun: o.dryRun });

  await stopped;
  await closeAll();
  return 0;
}

/**
 * Reads the source once and explains one Service. The kube source is listed once, bounded in time
 * (an unreachable or forbidden API rejects with a message naming the resource); a Service the
 * source does not have rejects with ServiceNotFoundError.
 */
export async function explain(
  target: string, o: { source: SourceSpec; kubeconfig: string | undefined; nodeName: string; registry: PluginRegistry },
): Promise<string> {
  const events = await readOnce(o.source, o.nodeName, o.kubeconfig);
  if (!events.some((e) => e.kind === 'service' && e.type === 'upsert'
    && `${e.object.metadata?.namespace}/${e.object.metadata?.name}` === target)) {
    throw new ServiceNotFoundError(target);
  }
  let config = defaultProxyConfig;
  for (const e of events) if (e.kind === 'config' && e.type === 'upsert') config = e.config;
  const state = new DesiredState(config, o.registry, o.nodeName);
  for (const e of events) {
    if (e.kind === 'service' && e.type === 'upsert') state.setService(e.object);
    if (e.kind === 'endpointslice' && e.type === 'upsert') state.setSlice(e.object);
    if (e.kind === 'node' && e.type === 'upsert') state.setNode(e.object);
  }
  state.sync();
  const [ns, name] = target.split('/');
  const entries = [...state.desiredTable.values()].filter((d) => d.origin.namespace === ns && d.origin.name === name);
  const problems = state.problems().filter((p) => p.service === target)
    .map((p) => `problem: ${p.reason}: ${p.message}`);
  return [renderExplain(target, entries), ...problems].join('\n');
}

/** Every object of a source, once: the files source's initial read, or one bounded list of the API. */
async function readOnce(spec: SourceSpec, nodeName: string, kubeconfig: string | undefined): Promise<SourceEvent[]> {
  if (spec.kind === 'kube') {
    const [{ listOnce }, { loadKubeClient }] =
      await Promise.all([import('../kube/list-once.js'), import('../kube/client.js')]);
    const client = await loadKubeClient(kubeconfig);
    try {
      return (await listOnce(client, nodeName)).events;
    } finally {
      client.close();
    }
  }
  const { source } = await wire(spec, nodeName, kubeconfig, () => undefined);
  const events: SourceEvent[] = [];
  await source.start((e) => events.push(e));
  await source.stop();
  return events;
}
