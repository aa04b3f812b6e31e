// Loads extra scheduler plugins from a directory (the only plugin code that does I/O). Each `*.js`
// or `*.mjs` file must export a SchedulerPlugin as `plugin` or `default` (plugins/types.ts). A file
// that fails to import, exports something else, or clashes with a registered name is reported as a
// PluginProblem and skipped: a broken plugin never stops the operator.
// One exception: a file whose import does not settle within the bound (a top-level await that never
// resolves) throws PluginLoadTimeoutError. It cannot be skipped: its module may still finish and
// run code later, and without the bound node would see an empty event loop and exit 0 silently.
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { PluginProblem, PluginRegistry } from '../../plugins/index.js';

/** How long one plugin file may take to import by default, milliseconds. */
export const DEFAULT_PLUGIN_LOAD_TIMEOUT_MS = 10_000;

/** A plugin file whose import did not settle within the bound; names the file. */
export class PluginLoadTimeoutError extends Error {
  constructor(readonly path: string, readonly timeoutMs: number) {
    super(`plugin ${path} did not finish loading within ${timeoutMs / 1000} s ` +
      '(a top-level await that never settles?); remove or fix it');
  }
}

/**
 * Registers every plugin file of `dir` into `registry`; the problems of the ones refused. Rejects
 * with PluginLoadTimeoutError when one file's import takes longer than `timeoutMs`.
 */
export async function loadPluginsFrom(
  dir: string,
  registry: PluginRegistry,
  opts: { timeoutMs?: number } = {},
): Promise<PluginProblem[]> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_PLUGIN_LOAD_TIMEOUT_MS;
  let files: string[];
  try {
    files = (await readdir(dir)).filter((f) => /\.m?js$/.test(f)).sort();
  } catch (e) {
    return [{ source: dir, reason: 'PluginDirUnreadable', message: `${dir}: ${(e as Error).message}` }];
  }
  const problems: PluginProblem[] = [];
  for (const file of files) {
    const path = join(dir, file);
    let mod: Record<string, unknown>;
    try {
      mod = await importWithin(path, timeoutMs);
    } catch (e) {
      if (e instanceof PluginLoadTimeoutError) throw e;
      problems.push({ source: path, reason: 'PluginLoadFailed', message: `${path}: ${(e as Error).message}` });
      continue;
    }
    const problem = registry.register(mod.plugin ?? mod.default, path);
    if (problem) problems.push(problem);
  }
  return problems;
}

/** import() of a file raced against a timer (which also keeps the event loop alive meanwhile). */
async function importWithin(path: string, timeoutMs: number): Promise<Record<string, unknown>> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new PluginLoadTimeoutError(path, timeoutMs)), timeoutMs);
  });
  try {
    return await Promise.race([import(pathToFileURL(path).href) as Promise<Record<string, unknown>>, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
