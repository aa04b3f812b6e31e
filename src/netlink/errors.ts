// Typed netlink errors, for every netlink family the project speaks. The `netlink` package only
// throws `Error('Request rejected: CODE')`; our own socket layer reads the errno from NLMSG_ERROR
// directly, and this is the one place that turns either form into a NetlinkError. Each family has
// its kind: IpvsError (src/ipvs/errors.ts), RtnlError (src/rtnl/errors.ts). pure: no I/O.
import { constants } from 'node:os';

const errnoByName = constants.errno as Record<string, number>;

/**
 * The errnos the project names, from the host's table (Linux values: ENOENT 2, ESRCH 3, EBADF 9,
 * EEXIST 17, ENODEV 19, EINVAL 22, ...). The one place errno numbers come from: fakes, clients and
 * rtnetlink all use these instead of literals.
 */
export const Errno = Object.freeze({
  EPERM: errnoByName.EPERM!, ENOENT: errnoByName.ENOENT!, ESRCH: errnoByName.ESRCH!, EBADF: errnoByName.EBADF!,
  EAGAIN: errnoByName.EAGAIN!, ENOMEM: errnoByName.ENOMEM!, EBUSY: errnoByName.EBUSY!, EEXIST: errnoByName.EEXIST!,
  ENODEV: errnoByName.ENODEV!, EINVAL: errnoByName.EINVAL!, ENOBUFS: errnoByName.ENOBUFS!,
  ERANGE: errnoByName.ERANGE!, EADDRNOTAVAIL: errnoByName.EADDRNOTAVAIL!, EOPNOTSUPP: errnoByName.EOPNOTSUPP!,
    EAFNOSUPPORT: errnoByName.EAFNOSUPPORT!,
});
const nameByErrno = new Map<number, string>(Object.entries(errnoByName).map(([k, v]) => [v, k]));

/**
 * A kernel error from a netlink request (or our refusal before sending one): the errno and the
 * operation. IpvsError (generic netlink IPVS, src/ipvs/) and RtnlError (rtnetlink, src/rtnl/) are
 * its kinds; the predicates below work on every kind.
 */
export class NetlinkError extends Error {
  /** Positive errno (ENOENT = 2, EEXIST = 17, ...); 0 for errors that are not the kernel's. */
  readonly errno: number;
  /** Symbolic errno name ("EEXIST"), or "EINVALARG" for arguments we refused before sending. */
  readonly code: string;
  /** The operation that failed, e.g. `add-dest TCP 10.0.0.1:80 -> 10.1.0.1:80 w=1 masq`. */
  readonly op: string;

  constructor(op: string, errno: number, code: string, detail?: string) {
    super(`${op}: ${detail ?? describeErrno(errno, code)}`);
    this.name = new.target.name;
    this.errno = errno;
    this.code = code;
    this.op = op;
  }

  /** An error from a positive or negative errno as the kernel reports it in NLMSG_ERROR. */
  static fromErrno<T extends NetlinkError>(this: NetlinkErrorClass<T>, op: string, errno: number, detail?: string): T {
    const e = Math.abs(errno);
    return new this(op, e, nameByErrno.get(e) ?? `E${e}`, detail);
  }

  /** Arguments refused before anything was sent to the kernel. */
  static invalidArgument<T extends NetlinkError>(this: NetlinkErrorClass<T>, op: string, message: string): T {
    return new this(op, 0, 'EINVALARG', message);
  }

  /** A malformed message from the kernel (or garbage handed to the decoder). */
  static malformed<T extends NetlinkError>(this: NetlinkErrorClass<T>, op: string, message: string): T {
    return new this(op, 0, 'EMALFORMED', message);
  }

  /** Converts the `netlink` package's message-only errors (`Request rejected: EEXIST`). */
  static fromPackageError<T extends NetlinkError>(this: NetlinkErrorClass<T>, op: string, err: unknown): T {
    if (err instanceof this) return err as T;
    const message = err instanceof Error ? err.message : String(err);
    const m = /Request rejected: (E[A-Z0-9]+)/.exec(message);
    if (m?.[1]) return new this(op, errnoByName[m[1]] ?? 0, m[1]);
    const errno = (err as { errno?: unknown })?.errno;
    if (typeof errno === 'number') {
      const e = Math.abs(errno);
      return new this(op, e, nameByErrno.get(e) ?? `E${e}`, message);
    }
    return new this(op, 0, 'EUNKNOWN', message);
  }
}

/** A NetlinkError subclass's constructor (for the static constructors above). */
export type NetlinkErrorClass<T> = new (op: string, errno: number, code: string, detail?: string) => T;


function describeErrno(errno: number, code: string): string {
  switch (code) {
    case 'EEXIST': return 'already exists (EEXIST)';
    case 'ENOENT': return 'no such object, or unknown scheduler/persistence engine (ENOENT)';
    case 'ESRCH': return 'no such virtual server (ESRCH)';
    case 'EINVAL': return 'the kernel rejected the arguments (EINVAL)';
    case 'EPERM': return 'operation not permitted: needs CAP_NET_ADMIN (EPERM)';
    default: return `kernel error ${code} (${errno})`;
  }
}

/** The object does not exist: ENOENT, or ESRCH which IPVS returns for a missing virtual server. */
export function isNotFound(e: unknown): boolean {
  return e instanceof NetlinkError && (e.code === 'ENOENT' || e.code === 'ESRCH');
}

/** The object exists already (EEXIST). */
export function isExists(e: unknown): boolean {
  return e instanceof NetlinkError && e.code === 'EEXIST';
}

/** The arguments were refused before touching the kernel. */
export function isInvalidArgument(e: unknown): boolean {
  return e instanceof NetlinkError && (e.code === 'EINVALARG' || e.code === 'EINVAL');
}
