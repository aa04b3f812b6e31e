// The ipset step of a sync as a difference (issue 29), like kube-proxy's syncIPSetEntries: our
// sets as the kernel holds them (ipset-save.ts) against what the desired state fills them with
// (render.ts desiredSets) -> one `ipset restore -exist` payload naming only what differs. pure.
// Per set: missing -> created; other type or family -> destroyed and created (swap refuses to
// exchange them, and destroy needs the rules naming the set gone: IptablesRestore flushes our
// chains first); a header that cannot hold the members (maxelem, range, extensions) or text not
// understood -> refilled through `<name>-tmp` + swap; otherwise `del` of the extra members, then
// `add` of the missing ones (dels first: a member printed in another form is deleted, then added).
import { PORT_RANGE, type WantedSet, createArgs } from './render.js';
import type { SavedSet, SavedSets } from './ipset-save.js';

/** What planIpsets decided; an inert value. */
export interface IpsetPlan {
  /** `ipset restore -exist` payload; '' when every set is in step (then nothing runs). */
  payload: string;
  /** Sets destroyed and created again: our rules naming them must be flushed before the payload. */
  recreate: string[];
  /** One line per set not changed in place, and why: `IPVSOP-VIPS: refilled: maxelem 2 < 3`. */
  notes: string[];
  /** Members deleted / added in place. */
  dels: number;
  adds: number;
}

/**
 * The payload making each of `wanted` hold exactly its members. `existing`: every set name on the
 * host (`ipset list -n`); `saved`: the dump of those of `wanted` that exist. Stale `<name>-tmp`
 * sets are destroyed. Garbage in the dump refills every existing set whole (the behaviour before).
 */
export function planIpsets(wanted: readonly WantedSet[], saved: SavedSets, existing: ReadonlySet<string>): IpsetPlan {
  const plan: IpsetPlan = { payload: '', recreate: [], notes: [], dels: 0, adds: 0 };
  const lines: string[] = [];
  const garbage = saved.garbage.length ? `the dump held lines not understood: ${saved.garbage[0]}` : undefined;
  for (const w of wanted) {
    const { name, members } = w;
    const tmp = `${name}-tmp`;
    if (existing.has(tmp)) lines.push(`destroy ${tmp}`);
    const create = (n: string) => lines.push(`create ${n} ${createArgs(w.spec, w.family, members.length)}`);
    const fill = (n: string) => { for (const m of members) lines.push(`add ${n} ${m}`); };
    if (!existing.has(name)) {
      create(name);
      fill(name);
      continue;
    }
    const cur = saved.sets.get(name);
    const other = cur && otherKind(w, cur);
    if (other) {
      plan.recreate.push(name);
      plan.notes.push(`${name}: recreated: ${other}`);
      lines.push(`destroy ${name}`);
      create(name);
      fill(name);
      continue;
    }
    const why = garbage ?? (cur ? cannotHold(w, cur) : 'listed but not in the dump');
    if (why || !cur) {
      plan.notes.push(`${name}: refilled: ${why}`);
      create(tmp);
      fill(tmp);
      lines.push(`swap ${tmp} ${name}`, `destroy ${tmp}`);
      continue;
    }
    const want = new Set(members);
    for (const m of cur.members) if (!want.has(m)) { lines.push(`del ${name} ${m}`); plan.dels++; }
    for (const m of members) if (!cur.members.has(m)) { lines.push(`add ${name} ${m}`); plan.adds++; }
  }
  plan.payload = lines.length ? `${lines.join('\n')}\n` : '';
  return plan;
}

/** Why `cur` is not the kind of set `w` is (swap cannot exchange them), or undefined. */
function otherKind(w: WantedSet, cur: SavedSet): string | undefined {
  if (cur.type !== w.spec.type) return `type ${cur.type}, not ${w.spec.type}`;
  const family = w.spec.type === 'bitmap:port' ? undefined : w.family === 'IPv6' ? 'inet6' : 'inet';
  if (cur.family !== family) return `family ${cur.family ?? 'none'}, not ${family ?? 'none'}`;
  return undefined;
}

/** Why `cur` (of the right kind) cannot be brought to `w` in place, or undefined. */
function cannotHold(w: WantedSet, cur: SavedSet): string | undefined {
  if (cur.odd) return cur.odd;
  if (cur.options.length) return `options ${cur.options.join(' ')}`;
  if (w.spec.type === 'bitmap:port') return cur.range === PORT_RANGE ? undefined : `range ${cur.range ?? 'none'}`;
  if (cur.maxelem === undefined) return 'no maxelem';
  return cur.maxelem < w.members.length ? `maxelem ${cur.maxelem} < ${w.members.length}` : undefined;
}

/**
 * Our sets as they are once `planIpsets(wanted, saved, existing)`'s payload has run: what the next
 * sync may plan against instead of reading the kernel again. In place, a set keeps its maxelem;
 * created or refilled, it has createArgs's.
 */
export function setsAfter(wanted: readonly WantedSet[], saved: SavedSets, existing: ReadonlySet<string>): SavedSets {
  const sets = new Map<string, SavedSet>();
  for (const w of wanted) {
    const cur = existing.has(w.name) ? saved.sets.get(w.name) : undefined;
    const inPlace = cur && !saved.garbage.length && !otherKind(w, cur) && !cannotHold(w, cur);
    const bitmap = w.spec.type === 'bitmap:port';
    sets.set(w.name, {
      name: w.name, type: w.spec.type, options: [], members: new Set(w.members),
      ...(bitmap ? { range: PORT_RANGE } : {
        family: w.family === 'IPv6' ? 'inet6' : 'inet',
        maxelem: inPlace ? cur.maxelem! : Math.max(65536, w.members.length),
      }),
    });
  }
  return { sets, garbage: [] };
}
