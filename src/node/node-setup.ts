// `ipvs-operator node-setup`: what an unprivileged operator pod cannot do itself, done once per
// node by a privileged init container (the opt-in kustomize component
// manifests/components/node-setup): load ip_vs and the scheduler modules, set the sysctls
// kube-proxy's IPVS mode sets, and strictARP when asked. Prints one line per thing done or
// found; exits 1 naming what failed.
import { release } from 'node:os';
import { applyStrictArp } from './arp.js';
import { applySysctls, ensureIpvsModule, ipvsSysctls, probeSchedulers } from './kernel.js';

export interface NodeSetupOptions {
  /** Kernel scheduler names to load (ip_vs_<name>). */
  schedulers: readonly string[];
  strictArp: boolean;
  stateDir: string;
}

/** Runs the setup; the lines to print and whether everything succeeded. */
export async function nodeSetup(o: NodeSetupOptions): Promise<{ lines: string[]; ok: boolean }> {
  const lines: string[] = [];
  let ok = true;
  if (await ensureIpvsModule()) lines.push('ip_vs: loaded');
  else {
    lines.push('ip_vs: cannot be loaded (no module, no SYS_MODULE, or /lib/modules not mounted)');
    ok = false;
  }
  const loaded = await probeSchedulers(o.schedulers);
  const missing = o.schedulers.filter((s) => !loaded.has(s));
  const missingText = missing.length ? `; missing: ${missing.join(' ')}` : '';
  lines.push(`schedulers: ${[...loaded].sort().join(' ') || 'none'}${missingText}`);
  const wanted = ipvsSysctls(release());
  const problems = applySysctls(wanted);
  for (const s of wanted) {
    const name = s.path.replace(/\//g, '.');
    if (!problems.some((p) => p.startsWith(`sysctl ${name}=`))) lines.push(`sysctl ${name}=${s.value}`);
  }
  for (const p of problems) lines.push(`${p}`);
  if (problems.length) ok = false;
  if (o.strictArp) {
    try {
      lines.push((await applyStrictArp(true, o.stateDir)) ?? 'strictARP: already on');
    } catch (e) {
      lines.push(`strictARP: ${(e as Error).message}`);
      ok = false;
    }
  }
  return { lines, ok };
}
