// What every Service is built in (BuildEnv): the configuration, this node's addresses and zone,
// the kernel's schedulers and the default scheduler, with the problems found making it. pure.
import type { V1Node } from './kube.js';
import type { PluginRegistry } from '../../plugins/index.js';
import type { PluginContext } from '../../plugins/types.js';
import { arr, obj, str } from './fields.js';
import { cidrContains, formatIp, parseCidr, parseIp } from '../model/addr.js';
import { chooseDefault } from './scheduler.js';
import type { BuildEnv } from './service-parse.js';
import type { KernelContext, Problem } from './types.js';
import type { ProxyConfig } from '../config/types.js';

const ZONE_LABEL = 'topology.kubernetes.io/zone';

/** The build environment; `onMade` is called each time it is made again (its problems may change). */
export class BuildEnvironment {
  private node: V1Node | undefined;
  env: BuildEnv;
  problems: Problem[] = [];

  constructor(
    private cfg: ProxyConfig,
    private readonly registry: PluginRegistry,
    private readonly nodeName: string,
    private readonly kernel: KernelContext,
    private readonly onMade: () => void,
  ) {
    this.env = this.make();
  }

  get config(): ProxyConfig {
    return this.cfg;
  }

  /** Whether this node's Node object is known (until it is, NodePorts have no addresses). */
  get hasNode(): boolean {
    return this.node !== undefined;
  }

  /** A new configuration (remakes the environment). */
  setConfig(config: ProxyConfig): void {
    this.cfg = config;
    this.env = this.make();
  }

  /** This node's Node object; true when what Services read from it (addresses, zone) changed. */
  setNode(node: V1Node | undefined): boolean {
    this.node = node;
    const next = this.make();
    const a = next.context;
    const b = this.env.context;
    const schedulers = (c: PluginContext) => [...(c.availableSchedulers ?? [])].sort().join(',');
    const same = next.nodeAddresses.join(',') === this.env.nodeAddresses.join(',')
      && a.nodeZone === b.nodeZone
      && a.kernelVersion === b.kernelVersion
      && schedulers(a) === schedulers(b)
      && (a.availableSchedulers === undefined) === (b.availableSchedulers === undefined);
    if (same) return false;
    this.env = next;
    return true;
  }

  private make(): BuildEnv {
    const problems: Problem[] = [];
    const zone = str(obj(obj(this.node?.metadata)?.labels)?.[ZONE_LABEL]);
    const context: PluginContext = { nodeName: this.nodeName, ...this.kernel, ...(zone ? { nodeZone: zone } : {}) };
    const nodeAddresses = nodePortAddressesOf(this.node, this.cfg, problems);
    const fallback = chooseDefault(this.registry, this.cfg.defaultScheduler, context, problems);
    this.problems = problems;
    this.onMade();
    return { config: this.cfg, registry: this.registry, context, nodeAddresses, fallback };
  }
}

/**
 * Node addresses (InternalIP, ExternalIP) in nodePortAddresses, canonical and sorted; config
 * problems appended. Per IP family, as kube-proxy (one proxier per family; pkg/proxy/util/
 * nodeport_addresses.go NewNodePortAddresses keeps the CIDRs of its family and, when none is
 * left, matches all of that family): an IPv4-only list leaves every IPv6 address serving.
 */
export function nodePortAddressesOf(node: V1Node | undefined, config: ProxyConfig, problems: Problem[]): string[] {
  const cidrs = config.nodePortAddresses.flatMap((text) => {
    const c = parseCidr(text);
    if (!c) {
      problems.push({ service: '', reason: 'InvalidConfig', message: `nodePortAddresses: "${text}" is not a CIDR` });
    }
    return c ? [c] : [];
  });
  const out = new Set<string>();
  for (const raw of arr(obj(obj(node)?.status)?.addresses) ?? []) {
    const a = obj(raw);
    if (a?.type !== 'InternalIP' && a?.type !== 'ExternalIP') continue;
    const ip = parseIp(str(a.address) ?? '');
    if (!ip) continue;
    const ofFamily = cidrs.filter((c) => c.family === ip.family);
    if (ofFamily.length && !ofFamily.some((c) => cidrContains(c, ip))) continue;
    out.add(formatIp(ip));
  }
  return [...out].sort();
}
