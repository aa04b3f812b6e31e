// What /proc says of netlink sockets, for tests: each row of /proc/<pid>/net/netlink (the fields
// of netlink_seq_show) and the inodes of a process's sockets (its fds). Pure reads, no writes.
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';

/** One row of /proc/<pid>/net/netlink. */
export interface NetlinkRow { family: string; rmem: number; dump: boolean; inode: string }

/** The netlink sockets of the network namespace `pid` ('self' by default) is in. */
export function netlinkRows(pid = 'self'): NetlinkRow[] {
  return readFileSync(`/proc/${pid}/net/netlink`, 'utf8').split('\n').slice(1).map((l) => l.trim().split(/\s+/))
    .filter((f) => f.length >= 10)
    .map((f) => ({ family: f[1]!, rmem: Number(f[4]), dump: f[6] !== '0', inode: f[9]! }));
}

/** The inodes of the sockets `pid` holds open ('self' by default); [] for a process gone. */
export function socketInodes(pid = 'self'): string[] {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return [];
  }
  return fds.flatMap((fd) => {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      return m ? [m[1]!] : [];
    } catch {
      return []; // an fd closed meanwhile (the directory read's own among them)
    }
  });
}
