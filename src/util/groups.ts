// Values grouped by a key, each named inside its group by a key of its own (its `member` key):
// a group of one is held as the value itself, a Map by member key only while the group has
// several. Nearly every group has one value, and a Map each would cost about 200 bytes. pure.

/** Groups of values by key; `memberOf` names a value inside its group. V must not be a Map. */
export class Groups<K, M, V> {
  private readonly groups = new Map<K, V | Map<M, V>>();

  constructor(private readonly memberOf: (v: V) => M) {}

  /** The value named `member` in group `key`. */
  get(key: K, member: M): V | undefined {
    const g = this.groups.get(key);
    if (g instanceof Map) return g.get(member);
    return g !== undefined && this.memberOf(g) === member ? g : undefined;
  }

  /** Whether group `key` holds a value. */
  has(key: K): boolean {
    return this.groups.has(key);
  }

  /** How many values group `key` holds. */
  size(key: K): number {
    const g = this.groups.get(key);
    return g instanceof Map ? g.size : g !== undefined ? 1 : 0;
  }

  /** Group `key`'s values, in the order their members first came. */
  values(key: K): V[] {
    const g = this.groups.get(key);
    return g instanceof Map ? [...g.values()] : g !== undefined ? [g] : [];
  }

  /** Adds `v` to group `key`, replacing the value of the same member. */
  set(key: K, v: V): void {
    const g = this.groups.get(key);
    if (g instanceof Map) g.set(this.memberOf(v), v);
    else if (g === undefined || this.memberOf(g) === this.memberOf(v)) this.groups.set(key, v);
    else this.groups.set(key, new Map([[this.memberOf(g), g], [this.memberOf(v), v]]));
  }

  /** Removes member `member` from group `key`; false when it was not there. */
  delete(key: K, member: M): boolean {
    const g = this.groups.get(key);
    if (!(g instanceof Map)) {
      if (g === undefined || this.memberOf(g) !== member) return false;
      this.groups.delete(key);
      return true;
    }
    if (!g.delete(member)) return false;
    if (g.size === 1) this.groups.set(key, g.values().next().value!);
    return true;
  }

  /** Every group of more than one value, as [key, values]. */
  *several(): IterableIterator<[K, V[]]> {
    for (const [key, g] of this.groups) if (g instanceof Map) yield [key, [...g.values()]];
  }
}
