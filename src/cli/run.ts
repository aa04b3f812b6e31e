// `run` and `explain`: where the real pieces are put together (sockets, sources, sinks, HTTP).
import { release } from 'node:os';
import type { PluginRegistry } from '../../plugins/index.js';
import { DesiredState } from '../desired/state.js';
import { defaultProxyConfig } from '../desired/types.js';
import { NetlinkIpvs } from '../ipvs/client.js';
import { formatOp } from '../model/ipvs.js';
import { serveHttp } from '../operator/http.js';
import { type IptablesSync, NoIptables } from '../operator/iptables.js';
import { applySysctls, ensureIpvsModule, ipvsSysctls, probeSchedulers } from '../operator/kernel.js';
import type { Log } from '../operator/log.js';
import { Metrics } from '../operator/metrics.js';
import { Operator } from '../operator/operator.js';
import { FakeVipLink, RtnlVipLink } from '../rtnl/vips.js';
import type { SourceEvent } from '../source/types.js';
import { renderExplain } from './explain.js';
import { type SourceSpec, iptablesPath, wire } from './wiring.js';

export interface RunOptions {
  source: SourceSpec;
  kubeconfig: string | undefined;
  nodeName: string;
  dryRun: boolean;
  metricsAddr: string;
  iptables: boolean;
  registry: PluginRegistry;
  log: Log;
}

/** Runs the operator until SIGTERM/SIGINT; the kernel is left as it is on exit. */
export async function runOperator(o: RunOptions): Promise<number> {
  const { log } = o;
  if (!(await ensureIpvsModule())) {
    log('error', 'the kernel has no IPVS (module ip_vs): nothing to program');
    return 1;
  }
  const ipvs = await NetlinkIpvs.open();
  const info = await ipvs.info();
  const kernelRelease = release();
  const schedulerNames = [...new Set(o.registry.names().map((n) => o.registry.get(n)!.kernelScheduler))];
  const schedulers = await probeSchedulers(schedulerNames);
  log('info', 'kernel', { release: kernelRelease, ipvs: info.version, schedulers: [...schedulers].sort() });

  const config = defaultProxyConfig;
  if (!o.dryRun) {
    for (const p of applySysctls(ipvsSysctls(kernelRelease, config.strictARP))) log('warn', 'sysctl not set', { problem: p });
  }
  const { source, events, status } = await wire(o.source, o.nodeName, o.kubeconfig, log);
  const iptables: IptablesSync = o.iptables && !o.dryRun ? await iptablesPath() : new NoIptables();
  const metrics = new Metrics();
  const operator = new Operator(config, {
    ipvs, vips: o.dryRun ? new FakeVipLink() : new RtnlVipLink(), iptables, events, status, log,
    kernel: { release: kernelRelease, ipvsVersion: info.version, schedulers },
    registry: o.registry, nodeName: o.nodeName, metrics,
    ...(o.dryRun ? { dryRun: (ops) => { for (const op of ops) process.stdout.write(`${formatOp(op)}\n`); } } : {}),
  });
  metrics.watchKernel(ipvs, () => operator.origins());

  const applyTimeouts = async (e: SourceEvent) => {
    if (e.kind !== 'config' || o.dryRun) return;
    const { tcpTimeout: tcp, tcpFinTimeout: tcpFin, udpTimeout: udp } = e.config;
    if (tcp || tcpFin || udp) await ipvs.setTimeouts({ tcp, tcpFin, udp }).catch((err: unknown) => log('warn', 'IPVS timeouts not set', { error: (err as Error).message }));
    for (const p of applySysctls(ipvsSysctls(kernelRelease, e.config.strictARP))) log('warn', 'sysctl not set', { problem: p });
  };
  await source.start((e) => {
    operator.handle(e);
    void applyTimeouts(e);
  });
  operator.start();
  const server = await serveHttp(o.metricsAddr, {
    ready: () => operator.ready,
    sinceLastSyncMs: () => (operator.last ? Date.now() - operator.last.at : undefined),
    syncPeriodMs: () => operator.currentConfig.syncPeriod * 1000,
  }, metrics, () => Object.fromEntries(operator.origins()));
  log('info', 'running', { node: o.nodeName, source: o.source.kind, metrics: o.metricsAddr, dryRun: o.dryRun });

  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      log('info', 'stopping; the kernel table is left as it is', { signal });
      resolve();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  await source.stop();
  await operator.stop();
  await new Promise<void>((r) => server.close(() => r()));
  ipvs.close();
  return 0;
}

/** Reads the source once and explains one Service. */
export async function explain(target: string, o: { source: SourceSpec; kubeconfig: string | undefined; nodeName: string; registry: PluginRegistry }): Promise<string> {
  const { source } = await wire(o.source, o.nodeName, o.kubeconfig, () => undefined);
  const events: SourceEvent[] = [];
  await source.start((e) => events.push(e));
  await source.stop();
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
  const problems = state.problems().filter((p) => p.service === target).map((p) => `problem: ${p.reason}: ${p.message}`);
  return [renderExplain(target, entries), ...problems].join('\n');
}
