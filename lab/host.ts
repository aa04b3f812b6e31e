// Host preparation for the lab VM: Debian packages the harness needs, and Debian's generic kernel
// unpacked into the gitignored cache (never installed on the host).
//
// LAB_KERNEL_SUITE=<suite> (say trixie) takes the kernel from that Debian suite instead of the
// host's own package lists, through package lists of its own in the cache, signed as the host's.
//
// Cache layout under <project>/.cache/lab/:
//   kernel/<package>/            `dpkg -x` of linux-image-<abi>-amd64 (+ depmod), re-used across runs
//   kernel/<package>/.complete   written last: the unpack finished
//   kernel.json                  { package, kver, dir } of the kernel in use
//   kernel-<suite>/, kernel-<suite>.json, apt-<suite>/   the same for LAB_KERNEL_SUITE's kernel
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { labCacheDir } from './paths.js';
import { run, runInherit, runOk } from './proc.js';

/** Host packages: qemu + what the guest uses from the host root (shared read-only over 9p). */
export const HOST_PACKAGES = [
  'qemu-system-x86', 'busybox-static', 'cpio', 'kmod', 'ipvsadm', 'ipset', 'iptables', 'iproute2', 'curl', 'conntrack', 'iputils-arping', 'wrk', 'nftables',
  // the lab cluster's Prometheus (lab/cluster/prometheus.ts) and its API server's store (lab/cluster/etcd.ts)
  'prometheus', 'etcd-server',
  // another suite's compressed modules (LAB_KERNEL_SUITE; trixie ships .ko.xz), and the unit test of it
  'xz-utils',
] as const;

const aptEnv = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
let aptUpdated = false;

export class LabSetupError extends Error {}

function log(msg: string): void {
  process.stderr.write(`lab: ${msg}\n`);
}

function isDebian(): boolean {
  return existsSync('/etc/debian_version') && existsSync('/usr/bin/apt-get') && existsSync('/usr/bin/dpkg-query');
}

function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

export async function aptUpdateOnce(): Promise<void> {
  if (aptUpdated) return;
  log('apt-get update');
  const code = await runInherit('apt-get', ['update', '-qq'], { env: aptEnv });
  if (code !== 0) throw new LabSetupError(`apt-get update failed (exit ${code})`);
  aptUpdated = true;
}

async function missingPackages(pkgs: readonly string[]): Promise<string[]> {
  const r = await run('dpkg-query', ['-W', '-f=${Package} ${Status}\n', ...pkgs]);
  const installed = new Set<string>();
  for (const line of r.stdout.split('\n')) {
    const [name, ...status] = line.trim().split(/\s+/);
    if (name && status.join(' ') === 'install ok installed') installed.add(name.replace(/:.*$/, ''));
  }
  return pkgs.filter((p) => !installed.has(p));
}

/** Installs the host packages that are missing (needs root on Debian). */
export async function ensureHostPackages(): Promise<void> {
  if (!isDebian()) {
    throw new LabSetupError(
      `the lab VM needs a Debian-based host (apt-get, dpkg) to install: ${HOST_PACKAGES.join(' ')}. ` +
      'On another system install the equivalents (qemu-system-x86_64, a static busybox, cpio, kmod, ipvsadm, ipset, ' +
      'iptables, iproute2, curl) and a Debian machine is still needed to fetch the kernel package.');
  }
  const missing = await missingPackages(HOST_PACKAGES);
  if (missing.length === 0) return;
  if (!isRoot()) {
    throw new LabSetupError(
      `missing host packages: ${missing.join(' ')}. Run as root, or install them first:\n` +
      `  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing.join(' ')}`);
  }
  await aptUpdateOnce();
  log(`installing ${missing.join(' ')}`);
  const code = await runInherit('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing], { env: aptEnv });
  if (code !== 0) throw new LabSetupError(`apt-get install ${missing.join(' ')} failed (exit ${code})`);
}

/** The Debian suite LAB_KERNEL_SUITE names, or undefined for the host's own package lists. */
export function kernelSuite(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const suite = env.LAB_KERNEL_SUITE?.trim();
  if (!suite) return undefined;
  if (!/^[a-z][a-z0-9-]{1,30}$/.test(suite)) throw new LabSetupError(`LAB_KERNEL_SUITE=${suite}: not a Debian suite name`);
  return suite;
}

/** apt options that read and keep a suite's package lists in the cache, apart from the host's. */
export function suiteAptOptions(suite: string, root = join(labCacheDir, `apt-${suite}`)): string[] {
  return ['-o', 'Dir::Etc::SourceList=/dev/null', '-o', `Dir::Etc::SourceParts=${join(root, 'sources')}`,
    '-o', `Dir::State::Lists=${join(root, 'lists')}`, '-o', `Dir::Cache=${join(root, 'cache')}`,
    '-o', 'Dir::State::status=/dev/null'];
}

const suiteUpdated = new Set<string>();

/** Fetches a suite's package lists into the cache, once a process; apt checks their signature. */
async function suiteUpdateOnce(suite: string): Promise<void> {
  if (suiteUpdated.has(suite)) return;
  const root = join(labCacheDir, `apt-${suite}`);
  for (const d of ['sources', 'lists/partial', 'cache/archives/partial']) mkdirSync(join(root, d), { recursive: true });
  writeFileSync(join(root, 'sources', `${suite}.sources`), `Types: deb\nURIs: http://deb.debian.org/debian\n` +
    `Suites: ${suite}\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n`);
  log(`apt-get update (${suite}'s lists, in ${root})`);
  const code = await runInherit('apt-get', [...suiteAptOptions(suite), '-o', 'APT::Sandbox::User=root', 'update', '-qq'], { env: aptEnv });
  if (code !== 0) throw new LabSetupError(`apt-get update of ${suite}'s lists failed (exit ${code})`);
  suiteUpdated.add(suite);
}

async function resolveKernelPackageOnce(suite?: string): Promise<string | undefined> {
  const r = await run('apt-cache', [...(suite ? suiteAptOptions(suite) : []), 'depends', 'linux-image-amd64']);
  if (r.code !== 0) return undefined;
  const m = /Depends: (linux-image-[0-9][^\s]*)/.exec(r.stdout);
  return m?.[1];
}

/** The current ABI-numbered kernel package, e.g. linux-image-6.1.0-56-amd64 (never -cloud: no 9p). */
export async function resolveKernelPackage(suite = kernelSuite()): Promise<string | undefined> {
  if (suite) {
    try {
      await suiteUpdateOnce(suite);
    } catch (e) {
      log(`${(e as Error).message}; resolving from ${suite}'s lists already in the cache, if any`);
    }
    return resolveKernelPackageOnce(suite);
  }
  let pkg = await resolveKernelPackageOnce();
  if (!pkg && isRoot() && isDebian()) {
    await aptUpdateOnce();
    pkg = await resolveKernelPackageOnce();
  }
  return pkg;
}

export interface KernelInfo {
  package: string;
  kver: string;
  /** The unpacked package root: boot/vmlinuz-<kver>, lib/modules/<kver>. */
  dir: string;
  vmlinuz: string;
  modulesDir: string;
}

function kernelInfo(pkg: string, dir: string): KernelInfo {
  const modRoot = join(dir, 'lib', 'modules');
  const kvers = existsSync(modRoot) ? readdirSync(modRoot) : [];
  const kver = kvers[0];
  if (!kver || kvers.length !== 1) throw new LabSetupError(`unexpected kernel tree in ${dir}: lib/modules has ${kvers.join(', ') || 'nothing'}`);
  return { package: pkg, kver, dir, vmlinuz: join(dir, 'boot', `vmlinuz-${kver}`), modulesDir: join(modRoot, kver) };
}

function readState(stateFile: string): { package: string } | undefined {
  try {
    return JSON.parse(readFileSync(stateFile, 'utf8')) as { package: string };
  } catch {
    return undefined;
  }
}

/** Downloads and unpacks Debian's current generic kernel into the cache, unless already there. */
export async function ensureKernel(suite = kernelSuite()): Promise<KernelInfo> {
  const kernelsDir = join(labCacheDir, suite ? `kernel-${suite}` : 'kernel');
  const stateFile = join(labCacheDir, suite ? `kernel-${suite}.json` : 'kernel.json');
  mkdirSync(kernelsDir, { recursive: true });
  let pkg = await resolveKernelPackage(suite);
  if (!pkg) {
    const state = readState(stateFile);
    if (state && existsSync(join(kernelsDir, state.package, '.complete'))) {
      log(`cannot resolve linux-image-amd64 with apt-cache; using the cached ${state.package}`);
      pkg = state.package;
    } else {
      throw new LabSetupError('cannot resolve the kernel package: `apt-cache depends linux-image-amd64` names no linux-image-<abi>-amd64 (run apt-get update as root)');
    }
  }
  const dir = join(kernelsDir, pkg);
  if (!existsSync(join(dir, '.complete'))) {
    const tmp = join(kernelsDir, `.tmp-${process.pid}`);
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    try {
      log(`downloading ${pkg} (~70 MB, once)`);
      // Sandbox user root: the cache dir may not be readable by _apt.
      const download = (name: string) => runOk('apt-get',
        [...(suite ? suiteAptOptions(suite) : []), 'download', '-q', '-o', 'APT::Sandbox::User=root', name], { cwd: tmp, env: aptEnv });
      try {
        await download(pkg);
      } catch (e) {
        // Stale package lists name a kernel that left the archive: refresh once and re-resolve.
        if (suite || aptUpdated || !isRoot()) throw e;
        await aptUpdateOnce();
        const fresh = await resolveKernelPackageOnce();
        if (fresh !== pkg) throw new LabSetupError(`the current kernel package changed to ${fresh ?? 'nothing'} while fetching ${pkg}: run again`);
        await download(pkg);
      }
      const deb = readdirSync(tmp).find((f) => f.endsWith('.deb'));
      if (!deb) throw new LabSetupError(`apt-get download ${pkg} left no .deb`);
      log(`unpacking ${deb}`);
      const tree = join(tmp, 'tree');
      await runOk('dpkg', ['-x', join(tmp, deb), tree]);
      // Packages of merged-/usr suites (trixie on) ship usr/lib/modules; depmod -b and the VM read lib/modules.
      if (!existsSync(join(tree, 'lib', 'modules')) && existsSync(join(tree, 'usr', 'lib', 'modules'))) {
        mkdirSync(join(tree, 'lib'), { recursive: true });
        renameSync(join(tree, 'usr', 'lib', 'modules'), join(tree, 'lib', 'modules'));
      }
      const info = kernelInfo(pkg, tree);
      await runOk('depmod', ['-b', tree, info.kver]);
      rmSync(dir, { recursive: true, force: true });
      renameSync(tree, dir);
      writeFileSync(join(dir, '.complete'), `${info.kver}\n`);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
    // Drop kernels of packages that are no longer current.
    for (const old of readdirSync(kernelsDir)) {
      if (old !== pkg && !old.startsWith('.')) {
        log(`removing old kernel ${old}`);
        rmSync(join(kernelsDir, old), { recursive: true, force: true });
      }
    }
  }
  const info = kernelInfo(pkg, dir);
  writeFileSync(stateFile, `${JSON.stringify({ package: pkg, kver: info.kver, dir }, null, 2)}\n`);
  return info;
}
