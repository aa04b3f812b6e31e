// Netlink attributes read in place, pure: where each attribute of a range of a buffer is, by type,
// with no Buffer or Map per attribute. The IPVS dumps decode 36 000 virtual servers or 360 000 real
// servers at a time; parseAttrs (framing.ts) made a subarray and a Map entry for each of their
// 15-35 attributes, a sixth of the time of reading the table (docs/performance.md).
import { NLA_HDRLEN, NLA_TYPE_MASK } from './constants.js';
import { NetlinkError, type NetlinkErrorClass } from './errors.js';

/** The attributes of `buf[start, end)`: payload offset and length by type (a later duplicate wins, as parseAttrs). */
export class AttrIndex {
  /**
   * [offset, length] per type; offset -1: absent. A plain array, not an Int32Array: allocating a
   * typed array was over half of decoding a real server (host profile: 1.3 -> 0.8 us per dest).
   */
  private readonly slots: number[];

  /** Types above `max` (a newer kernel's) are skipped. Throws E (default NetlinkError) on a bad length. */
  constructor(
    readonly buf: Buffer, start: number, end: number, max: number, E: NetlinkErrorClass<NetlinkError> = NetlinkError,
  ) {
    this.slots = new Array<number>(2 * (max + 1)).fill(-1);
    let off = start;
    while (off + NLA_HDRLEN <= end) {
      const len = buf.readUInt16LE(off);
      const type = buf.readUInt16LE(off + 2) & NLA_TYPE_MASK;
      if (len < NLA_HDRLEN || off + len > end) {
        throw NetlinkError.malformed.call(E, 'decode',
          `attribute ${type} length ${len} at offset ${off - start} of ${end - start}`);
      }
      if (type <= max) {
        this.slots[2 * type] = off + NLA_HDRLEN;
        this.slots[2 * type + 1] = len - NLA_HDRLEN;
      }
      off += (len + 3) & ~3;
    }
  }

  has(type: number): boolean {
    return this.slots[2 * type]! >= 0;
  }
  /** The payload's offset in `buf`, or -1. */
  at(type: number): number {
    return this.slots[2 * type]!;
  }
  /** The payload's length (0 when absent). */
  len(type: number): number {
    return Math.max(0, this.slots[2 * type + 1]!);
  }
  /** The payload as a subarray of `buf`, or undefined. */
  sub(type: number): Buffer | undefined {
    const at = this.at(type);
    return at < 0 ? undefined : this.buf.subarray(at, at + this.len(type));
  }
}
