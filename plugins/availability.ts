// Whether the node's kernel can run a plugin's scheduler. pure: no I/O.
import type { PluginContext, SchedulerPlugin } from './types.js';

/** Why the kernel cannot run the plugin's scheduler, or undefined when it can (or we cannot tell). */
export function unavailableReason(plugin: SchedulerPlugin, context: PluginContext): string | undefined {
  if (plugin.minKernel && context.kernelVersion && compareKernel(context.kernelVersion, plugin.minKernel) < 0) {
    return `scheduler "${plugin.kernelScheduler}" needs kernel >= ${plugin.minKernel}, this node runs ` +
      `${context.kernelVersion}`;
  }
  if (context.availableSchedulers && !context.availableSchedulers.has(plugin.kernelScheduler)) {
    return `the kernel has no "${plugin.kernelScheduler}" scheduler (module ${plugin.kernelModule} missing)`;
  }
  return undefined;
}

/** Compares "6.1.0-18-amd64"-style versions by their numeric major.minor.patch prefix. */
export function compareKernel(a: string, b: string): number {
  const pa = parseKernel(a);
  const pb = parseKernel(b);
  for (let i = 0; i < 3; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d) return Math.sign(d);
  }
  return 0;
}

function parseKernel(v: string): number[] {
  const m = /^(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(v);
  return m ? [Number(m[1]), Number(m[2] ?? 0), Number(m[3] ?? 0)] : [0, 0, 0];
}
