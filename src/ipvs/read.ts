// Reading the kernel's IPVS table through an IpvsClient: one dump of the virtual servers, then
// their real servers in one batched read (listRealServersMany). Used where the whole table or many
// virtual servers are read at once: the operator's cache (src/sync/table-cache.ts), the dry run.
import { type RealServer, type VirtualServer, realServerKey, virtualServerKey } from '../model/ipvs.js';
import { IpvsError } from './errors.js';
import type { MutableIpvsTable } from './table.js';
import type { IpvsClient, ReadOptions } from './types.js';

/** The real servers of each virtual server, by key, in order; rejects with the first failed dump's error. */
export async function readDestMaps(
  ipvs: IpvsClient, vss: readonly VirtualServer[], opts?: ReadOptions,
): Promise<Array<Map<string, RealServer>>> {
  if (!vss.length) return [];
  return (await ipvs.listRealServersMany(vss, opts)).map((list) => {
    if (list instanceof IpvsError) throw list;
    const dests = new Map<string, RealServer>();
    for (const rs of list) dests.set(realServerKey(rs), rs);
    return dests;
  });
}

/** The kernel's whole table; rejects with the first failed dump's error. */
export async function readTable(ipvs: IpvsClient, opts?: ReadOptions): Promise<MutableIpvsTable> {
  const vss = await ipvs.listVirtualServers(opts);
  const dests = await readDestMaps(ipvs, vss, opts);
  const table: MutableIpvsTable = new Map();
  vss.forEach((vs, i) => table.set(virtualServerKey(vs), { vs, dests: dests[i]! }));
  return table;
}
