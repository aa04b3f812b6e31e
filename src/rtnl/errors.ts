// rtnetlink errors: a NetlinkError of their own kind, so a failure of the VIP link is never
// mistaken for an IPVS one (isNotFound / isExists work on both). pure: no I/O.
import { NetlinkError } from '../netlink/errors.js';

/** An rtnetlink request that failed, or a link the operator refuses to touch. */
export class RtnlError extends NetlinkError {
  /** `name` exists and is not a dummy link: the operator only ever touches a dummy it can own. */
  static foreignLink(op: string, name: string, kind: string): RtnlError {
    return new RtnlError(op, 0, 'EFOREIGNLINK',
      `link ${name} exists and is ` +
      `${kind ? `a ${kind} link` : 'a device without a link kind (a physical NIC, lo, ...)'}, not a dummy: ` +
      'refusing to touch it (choose another interfaceName)');
  }
}

/** The operator refused a link that is not a dummy (RtnlError.foreignLink). */
export function isForeignLink(e: unknown): boolean {
  return e instanceof RtnlError && e.code === 'EFOREIGNLINK';
}
