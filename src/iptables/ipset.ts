// The ipset binary: list our sets' names and feed restore payloads. Execs only `ipset`.
import { type Runner, runChecked } from './exec.js';

/** Names of every set on the host (`ipset list -n`); ours are picked by name elsewhere. */
export async function listSetNames(run: Runner): Promise<Set<string>> {
  const out = await runChecked(run, 'ipset', ['list', '-n']);
  return new Set(out.split('\n').map((l) => l.trim()).filter(Boolean));
}

/** Runs an ipset-restore payload (`-exist`: re-adding a normalised duplicate is no error). No-op for ''. */
export async function restoreSets(run: Runner, payload: string): Promise<void> {
  if (payload) await runChecked(run, 'ipset', ['restore', '-exist'], payload);
}
