// The VIPs every Service wants, reference-counted: a VIP two Services share goes when both do. pure.

/** VIP reference counts and the live set of VIPs; `counters.vips` grows when the set changes. */
export class VipRefs {
  private readonly refs = new Map<string, number>();
  /** The keys of refs, kept as a Set so desired() hands out a live view instead of a copy. */
  readonly set = new Set<string>();

  constructor(private readonly counters: { vips: number }) {}

  ref(vip: string): void {
    const n = this.refs.get(vip) ?? 0;
    this.refs.set(vip, n + 1);
    if (n === 0) {
      this.set.add(vip);
      this.counters.vips++;
    }
  }

  unref(vip: string): void {
    const n = (this.refs.get(vip) ?? 0) - 1;
    if (n <= 0) {
      this.refs.delete(vip);
      if (this.set.delete(vip)) this.counters.vips++;
    } else this.refs.set(vip, n);
  }
}
