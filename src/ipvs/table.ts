// The IPVS table as a mutable value, and the one function that applies an op to it with the
// kernel's semantics. FakeIpvs is this table plus the client interface; the operator's cache of
// the kernel's table records each op that succeeded through the same function. pure: no I/O.
import {
  type IpvsOp, type RealServer, type VirtualServer, realServerKey, virtualServerKey,
} from '../model/ipvs.js';
import { Errno } from '../netlink/errors.js';

/** One virtual server and its real servers by realServerKey. */
export interface MutableEntry {
  vs: VirtualServer;
  dests: Map<string, RealServer>;
}

/** A table keyed by virtualServerKey. */
export type MutableIpvsTable = Map<string, MutableEntry>;

/**
 * Applies `op` to `table` as the kernel would (ip_vs_ctl.c, checked against the real kernel by
 * test/support/ipvs-contract.ts); returns the errno the kernel answers when it refuses (the table
 * is then unchanged), undefined on success. `op` is assumed valid (validate.ts `checkOp`: the
 * clients refuse invalid ops before the kernel sees them). `schedulers`: the kernel's schedulers;
 * when given, NEW/SET_SERVICE with another one is ENOENT (after EEXIST/ESRCH, as the kernel
 * orders them). Objects in `op` are stored as given: the caller decides what a new real server's
 * counters are. `key`: op.vs's key, when the caller has it.
 */
export function applyOp(
  table: MutableIpvsTable, op: IpvsOp, schedulers?: ReadonlySet<string>, key = virtualServerKey(op.vs),
): number | undefined {
  const e = table.get(key);
  switch (op.kind) {
    case 'add-service':
      if (e) return Errno.EEXIST;
      if (schedulers && !schedulers.has(op.vs.scheduler)) return Errno.ENOENT;
      table.set(key, { vs: op.vs, dests: new Map() });
      return undefined;
    case 'update-service':
      if (!e) return Errno.ESRCH;
      if (schedulers && !schedulers.has(op.vs.scheduler)) return Errno.ENOENT;
      e.vs = op.vs;
      return undefined;
    case 'delete-service':
      if (!e) return Errno.ESRCH;
      table.delete(key);
      return undefined;
    case 'add-dest':
    case 'update-dest':
    case 'delete-dest': {
      if (!e) return Errno.ESRCH;
      const rkey = realServerKey(op.rs);
      const old = e.dests.get(rkey);
      if (op.kind === 'add-dest') {
        if (old) return Errno.EEXIST;
        e.dests.set(rkey, op.rs);
      } else if (op.kind === 'update-dest') {
        if (!old) return Errno.ENOENT;
        e.dests.set(rkey, op.rs);
      } else {
        if (!old) return Errno.ENOENT;
        e.dests.delete(rkey);
      }
      return undefined;
    }
  }
}
