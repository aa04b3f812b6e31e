// Has the iptables + ipset path drifted from what the last sync wrote? The periodic check's
// question, answered without rewriting anything (a full restore of the sets costs about as much
// as the first sync's iptables step: tens of seconds at 10 000 Services under TCG). pure: no I/O.
import type { Desired } from '../desired/types.js';
import type { ProxyConfig } from '../config/types.js';
import type { Family } from '../model/addr.js';
import { CHAINS, HOOKS, type Table, makeNames } from './names.js';
import { renderIpsets, renderIptables } from './render.js';
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
  // Members per set: the restore payload's `add <set>-tmp` lines.
  const want = new Map<string, number>();
  for (const line of renderIpsets(desired, { prefix, families }).split('\n')) {
    const create = /^create (\S+)-tmp /.exec(line);
    if (create) want.set(create[1]!, want.get(create[1]!) ?? 0);
    const add = /^add (\S+)-tmp /.exec(line);
    if (add) want.set(add[1]!, (want.get(add[1]!) ?? 0) + 1);
  }
  for (const [set, n] of want) {
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
