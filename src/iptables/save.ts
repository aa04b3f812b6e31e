// Reading `iptables-save` output: which chains exist per table and which rules the built-in chains
// hold, so sync inserts a jump only when it is missing and cleanup deletes exactly our jumps.
// pure: no I/O.
import { CHAINS, HOOKS, type Names, type Table } from './names.js';

/** One table of an iptables-save dump. */
export interface SavedTable {
  /** Every chain declared (`:NAME POLICY [p:b]`), built-in or not. */
  chains: Set<string>;
  /** `-A CHAIN ...` lines, verbatim. */
  rules: string[];
}

/** A dump by table name. */
export type Saved = Map<string, SavedTable>;

/** Parses iptables-save (or ip6tables-save) text; unknown lines are ignored. */
export function parseSave(text: string): Saved {
  const out: Saved = new Map();
  let cur: SavedTable | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trimEnd();
    if (line.startsWith('*')) {
      cur = { chains: new Set(), rules: [] };
      out.set(line.slice(1), cur);
    } else if (!cur) {
      continue;
    } else if (line.startsWith(':')) {
      cur.chains.add(line.slice(1).split(' ')[0]!);
    } else if (line.startsWith('-A ')) {
      cur.rules.push(line);
    } else if (line === 'COMMIT') {
      cur = undefined;
    }
  }
  return out;
}

/** Splits a rule into arguments the way a shell would (double quotes group, `\"` escapes). */
export function splitRule(rule: string): string[] {
  const args: string[] = [];
  let cur = '';
  let quoted = false;
  let has = false;
  for (let i = 0; i < rule.length; i++) {
    const c = rule[i]!;
    if (c === '\\' && quoted && i + 1 < rule.length) { cur += rule[++i]; continue; }
    if (c === '"') { quoted = !quoted; has = true; continue; }
    if (!quoted && (c === ' ' || c === '\t')) {
      if (has || cur) args.push(cur);
      cur = '';
      has = false;
      continue;
    }
    cur += c;
  }
  if (has || cur) args.push(cur);
  return args;
}

/** The chain a rule jumps or goes to (`-j` / `-g`), undefined for none. */
export function ruleTarget(rule: string): string | undefined {
  const args = splitRule(rule);
  for (let i = 0; i < args.length - 1; i++) if (args[i] === '-j' || args[i] === '-g') return args[i + 1];
  return undefined;
}

/** Key of a jump from a built-in chain into one of ours: `nat PREROUTING IPVSOP-SERVICES`. */
export function jumpKey(table: string, builtin: string, target: string): string {
  return `${table} ${builtin} ${target}`;
}

/** Our hook jumps found in a dump (keys as jumpKey), each with its verbatim `-A` lines. */
export function findJumps(saved: Saved, names: Names): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const hook of HOOKS) {
    const rules = saved.get(hook.table)?.rules ?? [];
    const target = names.chain(hook.target);
    const prefix = `-A ${hook.builtin} `;
    for (const r of rules) {
      if (!r.startsWith(prefix) || ruleTarget(r) !== target) continue;
      const key = jumpKey(hook.table, hook.builtin, target);
      out.set(key, [...(out.get(key) ?? []), r]);
    }
  }
  return out;
}

/** Our chains that exist in the dump, per table (in CHAINS order). */
export function findChains(saved: Saved, names: Names): Record<Table, string[]> {
  const pick = (t: Table) => CHAINS[t].map(names.chain).filter((c) => saved.get(t)?.chains.has(c));
  return { nat: pick('nat'), filter: pick('filter'), mangle: pick('mangle') };
}
