// Loads extra scheduler plugins from a directory (the only plugin code that does I/O). Each `*.js`
// or `*.mjs` file must export a SchedulerPlugin as `plugin` or `default` (plugins/types.ts). A file
// that fails to import, exports something else, or clashes with a registered name is reported as a
// PluginProblem and skipped: a broken plugin never stops the operator.
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { PluginProblem, PluginRegistry } from '../../plugins/index.js';

/** Registers every plugin file of `dir` into `registry`; the problems of the ones refused. */
export async function loadPluginsFrom(dir: string, registry: PluginRegistry): Promise<PluginProblem[]> {
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
      mod = await import(pathToFileURL(path).href) as Record<string, unknown>;
    } catch (e) {
      problems.push({ source: path, reason: 'PluginLoadFailed', message: `${path}: ${(e as Error).message}` });
      continue;
    }
    const problem = registry.register(mod.plugin ?? mod.default, path);
    if (problem) problems.push(problem);
  }
  return problems;
}
