// Has the iptables + ipset path drifted from what the last sync wrote? The periodic check's
// question, answered without rewriting anything (a full restore of the sets costs about as much
// as the first sync's iptables step: tens of seconds at 10 000 Services under TCG). pure: no I/O
// (the member counts are memoised by the desired arrays they come from, which are not mutated).
import type { Desired } from '../desired/types.js';
import type { ProxyConfig } from '../config/types.js';
import type { Family } from '../model/addr.js';
import { CHAINS, HOOKS, type Table, makeNames } from './names.js';
import { desiredSets, renderIptables, vipSetCounts } from './render.js';
import { type Saved, jumpKey } from './save.js';

/** `ipset list -t` output: set name -> number of entries. */
export function parseSetCounts(text: string): Map<string, number> {
  const out = new Map<string, number>();
  let name: string | undefined;
  for (const line of text.split('\n')) {
    const n = /^Name: (\S+)/.exec(line);
    if (n) { name = n[1]; continue; }
    const c = /^Number of entries: (\d+)/.exec(line);
    if (c && name !== undefined) out.set(name, Number(c[1]));
  }
  return out;
}

/** The members per set the entries give, by the `desired.sets` array they were counted from. */
const counted = new WeakMap<object, { key: string; want: ReadonlyMap<string, number> }>();

/**
 * Members per set of ours (every set, empty ones too), as sync() fills them. The entries' part is
 * kept for the same `desired.sets` array (DesiredState hands out the same one until a set entry
 * changes, and never mutates it): the periodic check asks every syncPeriod, and building the
 * members of 66 000 entries cost 2.5 s of a 30 000-Service check under the lab's TCG. The VIPS
 * sets' part (desired.vips is a live set) is counted each time, unsorted.
 */
export function wantedCounts(
  desired: Pick<Desired, 'sets' | 'vips'>, prefix: string | undefined, families: readonly Family[],
): ReadonlyMap<string, number> {
  const opts = { prefix, families };
  const key = `${prefix ?? ''} ${families.join(',')}`;
  let hit = counted.get(desired.sets);
  if (!hit || hit.key !== key) {
    const fromEntries = desiredSets({ sets: desired.sets, vips: new Set() }, opts);
    const want = new Map(fromEntries.map((s) => [s.name, s.members.length] as const));
    counted.set(desired.sets, (hit = { key, want }));
  }
  const want = new Map(hit.want);
  for (const [name, n] of vipSetCounts(desired.vips, families, prefix)) want.set(name, want.get(name)! + n);
  return want;
}

/** What the kernel holds, as read for the check. */
export interface IptablesState {
  saved: Partial<Record<Family, Saved>>;
  setCounts: ReadonlyMap<string, number>;
}

/**
 * The first difference found (a line for the log), or undefined when in step.
 * What is compared: every chain of ours exists with the number of rules the render gives it,
 * every hook jump is in place, and every set of ours exists with the number of members the
 * render gives it. That catches what happens on real nodes (a flush, a deleted chain or rule, a
 * destroyed or emptied set, another proxy's cleanup); an in-place edit of one rule into another,
 * or one member swapped for another, is not seen until the next change, configuration change or
 * failed sync re-applies everything.
 */
export function iptablesDrift(
  desired: Pick<Desired, 'sets' | 'vips'>, config: ProxyConfig, state: IptablesState, prefix?: string,
): string | undefined {
  const names = makeNames(prefix);
  const families = Object.keys(state.saved) as Family[];
  for (const [set, n] of wantedCounts(desired, prefix, families)) {
    const have = state.setCounts.get(set);
    if (have === undefined) return `set ${set} is missing`;
    if (have !== n) return `set ${set} has ${have} members, not ${n}`;
  }
  const payload = renderIptables(config, { prefix });
  for (const family of families) {
    const saved = state.saved[family]!;
    const text = family === 'IPv4' ? payload.v4 : payload.v6;
    for (const table of Object.keys(CHAINS) as Table[]) {
      const t = saved.get(table);
      for (const suffix of CHAINS[table]) {
        const chain = names.chain(suffix);
        if (!t?.chains.has(chain)) return `${family} ${table} chain ${chain} is missing`;
        const rendered = text.split('\n').filter((l) => l.startsWith(`-A ${chain} `)).length;
        const have = t.rules.filter((l) => l.startsWith(`-A ${chain} `)).length;
        if (have !== rendered) return `${family} ${table} chain ${chain} has ${have} rules, not ${rendered}`;
      }
      for (const h of HOOKS.filter((x) => x.table === table)) {
        const jump = t?.rules.some((l) =>
          l.startsWith(`-A ${h.builtin} `) && new RegExp(`-j ${names.chain(h.target)}( |$)`).test(l));
        if (!jump) return `${family} ${table} jump ${jumpKey(table, h.builtin, names.chain(h.target))} is missing`;
      }
    }
  }
  return undefined;
}
