// Reading `ipset save` text (the restore-mode `save <name>` lines print the same): per set its
// header and members, as the kernel prints them (ipset 7.17, Linux 6.1, checked in the lab VM:
// test/kernel/ipset-sync.test.ts). pure: no I/O. Nothing here throws: a line not understood
// marks its set `odd` (the planner then refills that set whole) or, outside any set, is returned
// in `garbage` (the planner then refills every set of ours, as before issue 29).

/** One set as saved. */
export interface SavedSet {
  name: string;
  /** `hash:ip,port`, `bitmap:port`, ... as printed (any text: unknown types are kept). */
  type: string;
  /** `inet` / `inet6`; undefined for bitmap types (no family). */
  family?: string;
  maxelem?: number;
  /** bitmap:port's `range 0-65535`. */
  range?: string;
  /** Header options other than family, hashsize, maxelem, range, bucketsize, initval (timeout, counters, ...). */
  options: string[];
  /** Members exactly as printed (the element's first word). */
  members: Set<string>;
  /** Why this set's text was not understood (the first reason); undefined when it was. */
  odd?: string;
}

/** What a save dump held. */
export interface SavedSets {
  sets: Map<string, SavedSet>;
  /** Lines that belong to no set or are no ipset command, verbatim (at most 10 kept). */
  garbage: string[];
}

/** Header words that take a value and do not change what a set can hold or how it matches. */
const IGNORED = new Set(['hashsize', 'bucketsize', 'initval']);
/** A member as the kernel prints our types: addresses, `proto:port`, `/prefix`, commas. */
const MEMBER = /^[0-9a-z.:/,-]{1,120}$/;

/** Parses `ipset save` output; see the file comment for what happens to text it does not know. */
export function parseIpsetSave(text: string): SavedSets {
  const sets = new Map<string, SavedSet>();
  const garbage: string[] = [];
  const junk = (line: string) => { if (garbage.length < 10) garbage.push(line); };
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    const words = line.split(/\s+/);
    const [op, name] = words;
    if (op === 'create' && name && words[2]) {
      if (sets.has(name)) { sets.get(name)!.odd ??= 'created twice in the dump'; continue; }
      sets.set(name, parseHeader(name, words[2], words.slice(3)));
    } else if (op === 'add' && name && words[2] && sets.has(name)) {
      const set = sets.get(name)!;
      if (words.length > 3) set.odd ??= `member with extensions: ${line.slice(0, 80)}`;
      else if (!MEMBER.test(words[2])) set.odd ??= `member not understood: ${line.slice(0, 80)}`;
      else set.members.add(words[2]);
    } else {
      junk(line.slice(0, 200));
    }
  }
  return { sets, garbage };
}

function parseHeader(name: string, type: string, words: string[]): SavedSet {
  const set: SavedSet = { name, type, options: [], members: new Set() };
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    const value = words[i + 1];
    if (w === 'family' && value) { set.family = value; i++; }
    else if (w === 'maxelem' && value && /^\d+$/.test(value)) { set.maxelem = Number(value); i++; }
    else if (w === 'range' && value) { set.range = value; i++; }
    else if (IGNORED.has(w) && value) i++;
    else set.options.push(w);
  }
  return set;
}
