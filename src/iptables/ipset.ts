// The ipset binary: list our sets' names, read some sets, feed restore payloads. Execs only `ipset`.
import { type Runner, runChecked } from './exec.js';

/** Names of every set on the host (`ipset list -n`); ours are picked by name elsewhere. */
export async function listSetNames(run: Runner): Promise<Set<string>> {
  const out = await runChecked(run, 'ipset', ['list', '-n']);
  return new Set(out.split('\n').map((l) => l.trim()).filter(Boolean));
}

/**
 * `ipset save` text of just the named sets ('' for none), from one process: ipset's restore mode
 * accepts `save <name>` lines. A plain `ipset save` would print every set on the host, foreign
 * ones too (kube-proxy's KUBE-* sets hold as many members as ours when both run). Rejects when a
 * named set is gone (destroyed since it was listed): the sync fails and is retried.
 */
export async function saveSets(run: Runner, names: readonly string[]): Promise<string> {
  if (!names.length) return '';
  return runChecked(run, 'ipset', ['restore'], names.map((n) => `save ${n}\n`).join(''));
}

/** Whether an `ipset restore` payload only reads (`save` / `list` lines): what saveSets sends. */
export function isReadOnlyRestore(input: string): boolean {
  const lines = input.split('\n').filter((l) => l.trim());
  return lines.length > 0 && lines.every((l) => /^\s*(save|list)(\s|$)/.test(l));
}

/** Runs an ipset-restore payload (`-exist`: re-adding a normalised duplicate is no error). No-op for ''. */
export async function restoreSets(run: Runner, payload: string): Promise<void> {
  if (payload) await runChecked(run, 'ipset', ['restore', '-exist'], payload);
}
