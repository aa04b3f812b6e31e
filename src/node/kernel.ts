// The host edge of the sync besides netlink: kernel version, loading and probing IPVS modules,
// and the sysctls kube-proxy sets for IPVS mode. Every failure here is reported, never thrown
// past the caller: a node whose sysctls cannot be written still gets its virtual servers.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { release } from 'node:os';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Loads a module with modprobe; false when that fails (missing module, no modprobe, built in). */
async function modprobe(name: string): Promise<boolean> {
  try {
    await run('modprobe', ['-q', name]);
    return true;
  } catch {
    return false;
  }
}

/** Whether the kernel has module `name` loaded or built in. */
function moduleLoaded(name: string): boolean {
  if (existsSync(`/sys/module/${name}`)) return true;
  try {
    return readFileSync(`/lib/modules/${release()}/modules.builtin`, 'utf8').includes(`/${name}.ko`);
  } catch {
    return false;
  }
}

/** Loads ip_vs (generic netlink does not autoload the IPVS family); true when it is there. */
export async function ensureIpvsModule(): Promise<boolean> {
  return moduleLoaded('ip_vs') || (await modprobe('ip_vs')) || moduleLoaded('ip_vs');
}

/**
 * Which of `schedulers` the kernel offers: a scheduler is available when its module
 * (ip_vs_<name>) is loaded, built in, or loads now. Kube-proxy does the same check at start.
 */
export async function probeSchedulers(schedulers: readonly string[]): Promise<Set<string>> {
  const out = new Set<string>();
  await Promise.all(schedulers.map(async (s) => {
    const mod = `ip_vs_${s}`;
    if (moduleLoaded(mod) || ((await modprobe(mod)) && moduleLoaded(mod))) out.add(s);
  }));
  return out;
}

/** One sysctl to set, and why. */
export interface Sysctl {
  path: string;
  value: string;
}

/**
 * The sysctls kube-proxy's IPVS mode sets: conntrack for IPVS (the iptables path matches on it),
 * expire connections to removed real servers and quiescent templates, conn_reuse_mode 0 on
 * kernels before 5.9 (where 1 delayed reused connections by a second), and forwarding. pure.
 * (strictARP's ARP settings are arp.ts's: they are restored when it is turned off.)
 */
export function ipvsSysctls(kernel: string): Sysctl[] {
  const [major = 0, minor = 0] = kernel.split(/[.-]/).map(Number);
  const out: Sysctl[] = [
    { path: 'net/ipv4/vs/conntrack', value: '1' },
    { path: 'net/ipv4/vs/expire_nodest_conn', value: '1' },
    { path: 'net/ipv4/vs/expire_quiescent_template', value: '1' },
    { path: 'net/ipv4/ip_forward', value: '1' },
  ];
  if (major < 5 || (major === 5 && minor < 9)) out.push({ path: 'net/ipv4/vs/conn_reuse_mode', value: '0' });
  return out;
}

/** Writes the sysctls that differ; returns the problems (one line each), [] when all are set. */
export function applySysctls(sysctls: readonly Sysctl[]): string[] {
  const problems: string[] = [];
  for (const s of sysctls) {
    const file = `/proc/sys/${s.path}`;
    try {
      if (readFileSync(file, 'utf8').trim() !== s.value) writeFileSync(file, s.value);
    } catch (e) {
      problems.push(`sysctl ${s.path.replace(/\//g, '.')}=${s.value}: ${(e as Error).message}`);
    }
  }
  return problems;
}
