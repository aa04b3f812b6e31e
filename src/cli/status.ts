// `ipvs-operator status` and `cleanup`: read or remove what is in the kernel, each virtual server
// annotated with the Service it serves (asked from the running operator over HTTP, /origins).
import { applyStrictArp } from '../node/arp.js';
import { NetlinkIpvs } from '../ipvs/client.js';
import { readTable } from '../ipvs/read.js';
import { isNotFound } from '../netlink/errors.js';
import { type VirtualServer, formatHostPort, virtualServerKey } from '../model/ipvs.js';
import { isForeignLink } from '../rtnl/errors.js';
import { RtnlVipLink } from '../rtnl/vips.js';
import type { IptablesSync } from '../iptables/sync.js';
import { ensureIpvsModule } from '../node/kernel.js';
import { DEFAULT_STATE_DIR, FileOwnershipRecord, type OwnershipRecord, recordPath } from '../sync/record.js';
import { defaultProxyConfig } from '../config/types.js';

/** What the operator reports per virtual server key at /origins. */
export type Origins = Record<string, { namespace: string; name: string; portName: string; plugin: string }>;

/** Asks a running operator which Service each virtual server belongs to; undefined when it does not answer. */
export async function fetchOrigins(addr: string): Promise<Origins | undefined> {
  try {
    const res = await fetch(`http://${addr}/origins`, { signal: AbortSignal.timeout(2000) });
    return res.ok ? ((await res.json()) as Origins) : undefined;
  } catch {
    return undefined;
  }
}

const pad = (s: string, n: number) => s.padEnd(n);
const num = (v: bigint | number | undefined) => String(v ?? 0).padStart(9);

/** The kernel's table like `ipvsadm -Ln --stats`, each virtual server followed by its Service. */
export function renderStatus(
  table: Array<{ vs: VirtualServer; dests: Awaited<ReturnType<NetlinkIpvs['listRealServers']>> }>,
  origins: Origins | undefined,
): string {
  const lines = [
    `${pad('Prot LocalAddress:Port', 34)} ${pad('Scheduler', 10)}${'Conns'.padStart(9)}${'InPkts'.padStart(9)}`
      + `${'OutPkts'.padStart(9)}${'InBytes'.padStart(9)}${'OutBytes'.padStart(9)}  Service`,
    `  -> ${pad('RemoteAddress:Port', 28)} ${pad('Weight', 10)}${'Active'.padStart(9)}${'InAct'.padStart(9)}`,
  ];
  for (const { vs, dests } of [...table].sort((a, b) => virtualServerKey(a.vs).localeCompare(virtualServerKey(b.vs)))) {
    const key = virtualServerKey(vs);
    const o = origins?.[key];
    const svc = o ? `${o.namespace}/${o.name}${o.portName ? `:${o.portName}` : ''} (${o.plugin})`
      : origins ? '(not ours)' : '';
    const s = vs.stats;
    const head = vs.fwmark ? `FWM  ${vs.fwmark}` : `${pad(vs.protocol, 4)} ${formatHostPort(vs.address, vs.port)}`;
    lines.push(`${pad(head, 34)} ${pad(vs.scheduler, 10)}${num(s?.conns)}${num(s?.inPkts)}${num(s?.outPkts)}`
      + `${num(s?.inBytes)}${num(s?.outBytes)}  ${svc}`);
    for (const d of dests) {
      const to = pad(formatHostPort(d.address, d.port), 28);
      lines.push(`  -> ${to} ${pad(String(d.weight), 10)}${num(d.activeConns)}${num(d.inactiveConns)}`);
    }
  }
  if (!origins) lines.push('', '(no running operator answered at /origins: Services not shown)');
  return lines.join('\n');
}

/** Reads the kernel's table and renders it. */
export async function status(operatorAddr: string): Promise<string> {
  if (!(await ensureIpvsModule())) throw new Error('this kernel has no IPVS (module ip_vs): there is no table to show');
  const ipvs = await NetlinkIpvs.open();
  try {
    const table = [...(await readTable(ipvs)).values()].map((e) => ({ vs: e.vs, dests: [...e.dests.values()] }));
    return renderStatus(table, await fetchOrigins(operatorAddr));
  } finally {
    ipvs.close();
  }
}

/**
 * Removes exactly what the operator created: the virtual servers its ownership record lists
 * (NodePorts on node addresses included) and those on the addresses of its dummy interface, the
 * interface, the record, and (through `iptables`) its chains and sets. Any other virtual server
 * is left alone: without a record entry or one of our VIPs it may be someone else's.
 */
export async function cleanup(interfaceName: string, iptables: IptablesSync, record: OwnershipRecord,
  stateDir?: string): Promise<string[]> {
  const done: string[] = [];
  // strictARP's ARP settings go back to what the node had (arp.ts), if the operator changed them.
  if (stateDir !== undefined) {
    const note = await applyStrictArp(false, stateDir)
      .catch((e: unknown) => `strictARP: not restored: ${(e as Error).message}`);
    if (note) done.push(note);
  }
  const vips = new RtnlVipLink();
  let refused: unknown;
  try {
    // A link of another kind under the name is not ours: neither it nor virtual servers on its
    // addresses are touched; what the record lists and the iptables path are still removed.
    const addresses = new Set(await vips.list(interfaceName).catch((e: unknown) => {
      if (!isForeignLink(e)) throw e;
      refused = e;
      return [];
    }));
    const recorded = (await record.load()) ?? new Set<string>();
    if ((addresses.size || recorded.size) && (await ensureIpvsModule())) {
      const ipvs = await NetlinkIpvs.open();
      try {
        for (const vs of await ipvs.listVirtualServers()) {
          if (vs.fwmark || !(addresses.has(vs.address) || recorded.has(virtualServerKey(vs)))) continue;
          try {
            await ipvs.deleteVirtualServer(vs);
            done.push(`delete-service ${virtualServerKey(vs)}`);
          } catch (e) {
            if (!isNotFound(e)) throw e;
          }
        }
      } finally {
        ipvs.close();
      }
    }
    if (!refused && (await vips.deleteLink(interfaceName))) done.push(`delete-link ${interfaceName}`);
    await record.remove();
  } finally {
    vips.close();
  }
  await iptables.cleanup();
  done.push('iptables: operator chains and sets removed');
  if (refused) throw new Error(`${done.join('; ')}; but: ${(refused as Error).message}`);
  return done;
}

/** `status --service NS/NAME`: the Service's backends across the cluster, from the API. */
export async function clusterStatus(target: string, kubeconfig: string | undefined): Promise<string> {
  const [{ loadKubeClient }, { readClusterView }, { clusterShares, renderShares }] = await Promise.all([
    import('../kube/client.js'), import('../kube/cluster-view.js'), import('../balance/cluster-view.js')]);
  const client = await loadKubeClient(kubeconfig);
  try {
    const [namespace, name] = target.split('/') as [string, string];
    const { reports, weights } = await readClusterView(client, namespace, name);
    const leader = (weights as { spec?: { leader?: unknown } } | undefined)?.spec?.leader;
    return renderShares(target, clusterShares(target, reports, weights),
      typeof leader === 'string' ? leader : undefined);
  } finally {
    client.close();
  }
}

/**
 * `ipvs-operator cleanup` with its flags: the interface and state dir default as the command's do,
 * the record is the state dir's, iptables the host's. The lab's tests call it in their own process.
 */
export async function cleanupNode(interfaceName = defaultProxyConfig.interfaceName,
  stateDir = DEFAULT_STATE_DIR): Promise<string[]> {
  const { iptablesPath } = await import('./wiring.js');
  return cleanup(interfaceName, await iptablesPath(), new FileOwnershipRecord(recordPath(stateDir)), stateDir);
}
