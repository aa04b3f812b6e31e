// The lab VM: Debian's generic kernel (it has IPVS; the host's kernel may not) booted under qemu
// TCG with the host's / shared read-only over 9p (so the guest uses the host's node, ipvsadm,
// iptables, ip) and the project shared read-write at the same path. One VM per command: boot, run,
// print an exit marker on the serial console, power off. No NIC (`-nic none`): all guest traffic
// stays on veth pairs between network namespaces inside the guest.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { ensureHostPackages, ensureKernel, type KernelInfo } from './host.js';
import { ensureInitramfs } from './initramfs.js';
import { labCacheDir, projectRoot } from './paths.js';
import { shQuote } from './proc.js';

export const GUEST_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * The guest's PATH: the directory of the node running the lab first, so a guest `node` is this
 * very binary (CI's Node 24 under .cache/node, visible in the guest over the 9p share of /) and
 * not whatever /usr/local/bin/node the host also has.
 */
export function guestPath(execPath: string = process.execPath): string {
  const dir = dirname(execPath);
  return GUEST_PATH.split(':').includes(dir) ? GUEST_PATH : `${dir}:${GUEST_PATH}`;
}
/** Exit code when the timeout fired (as timeout(1)). */
export const EXIT_TIMEOUT = 124;
/** Exit code when the VM failed before reporting the command's exit code. */
export const EXIT_VM_FAILURE = 125;

export interface LabImage {
  kernel: KernelInfo;
  initramfs: string;
}

/** Installs missing host packages, fetches the kernel once, builds the initramfs. Idempotent. */
export async function prepareLab(): Promise<LabImage> {
  await ensureHostPackages();
  const kernel = await ensureKernel();
  const initramfs = await ensureInitramfs(kernel);
  return { kernel, initramfs };
}

export interface RunInVmOptions {
  /** argv of the command to run in the guest (no shell involved). */
  command: readonly string[];
  /** Guest working directory; default the project root. Must be inside the project (shared) or a host path. */
  cwd?: string;
  /** Wall-clock limit for the whole VM (boot included); default 10 minutes. */
  timeoutMs?: number;
  /** Guest memory; default 2048 MB. */
  memoryMb?: number;
  /** Extra guest environment. */
  env?: Record<string, string>;
  /** Guest vCPUs; default 2. */
  cpus?: number;
  /** Show kernel/init output (boot log) too; also LAB_VERBOSE=1. */
  verbose?: boolean;
  /** Where guest output goes; default process.stdout. */
  out?: NodeJS.WritableStream;
  /** Pre-built image (skips prepareLab). */
  image?: LabImage;
}

const SAFE_PATH = /^\/[A-Za-z0-9._/+-]*$/;

/**
 * Splits the serial stream: drops everything before the start marker (kept to show on failure),
 * strips the exit marker and reads the exit code from it, and passes the rest through as it arrives.
 */
export class SerialFilter {
  private buf = '';
  private started = false;
  private bootLog = '';
  exitCode: number | undefined;
  private readonly startMarker: string;
  private readonly exitPrefix: string;

  constructor(nonce: string, private readonly write: (s: string) => void, private readonly verbose = false) {
    this.startMarker = `<<IPVS-LAB-START ${nonce}>>`;
    this.exitPrefix = `<<IPVS-LAB-EXIT ${nonce} `;
  }

  get sawStart(): boolean {
    return this.started;
  }

  get boot(): string {
    return this.bootLog;
  }

  push(chunk: string): void {
    if (this.exitCode !== undefined) return;
    this.buf += chunk.replace(/\r\n/g, '\n');
    for (;;) {
      if (!this.started) {
        const i = this.buf.indexOf(this.startMarker);
        if (i < 0) {
          const keep = holdBack(this.buf, this.startMarker);
          this.boot_(this.buf.slice(0, this.buf.length - keep));
          this.buf = this.buf.slice(this.buf.length - keep);
          return;
        }
        this.boot_(this.buf.slice(0, i));
        this.buf = this.buf.slice(i + this.startMarker.length).replace(/^\r?\n/, '');
        this.started = true;
        continue;
      }
      const i = this.buf.indexOf(this.exitPrefix);
      if (i < 0) {
        const keep = Math.max(holdBack(this.buf, this.exitPrefix), this.buf.endsWith('\r') ? 1 : 0);
        this.emit(this.buf.slice(0, this.buf.length - keep));
        this.buf = this.buf.slice(this.buf.length - keep);
        return;
      }
      this.emit(this.buf.slice(0, i));
      this.buf = this.buf.slice(i);
      const m = /^<<IPVS-LAB-EXIT \S+ (\d+)>>/.exec(this.buf);
      if (!m) return; // marker not complete yet
      this.exitCode = Number(m[1]);
      this.buf = '';
      return;
    }
  }

  /** Flushes what is held back (at the end of the stream). */
  end(): void {
    if (this.exitCode !== undefined) return;
    if (this.started) this.emit(this.buf);
    else this.boot_(this.buf);
    this.buf = '';
  }

  private emit(s: string): void {
    if (s) this.write(s);
  }

  private boot_(s: string): void {
    if (!s) return;
    if (this.verbose) this.write(s);
    this.bootLog = (this.bootLog + s).slice(-64 * 1024);
  }
}

/** Length of the longest suffix of `s` that is a proper prefix of `marker`. */
function holdBack(s: string, marker: string): number {
  for (let n = Math.min(s.length, marker.length - 1); n > 0; n--) {
    if (marker.startsWith(s.slice(s.length - n))) return n;
  }
  return 0;
}

interface GuestScriptOptions {
  nonce: string;
  cwd: string;
  command: readonly string[];
  env: Record<string, string>;
  /** Our stdout is a terminal of this size: the guest command gets the console (a tty) too. */
  tty?: { cols: number; rows: number } | undefined;
}

function guestScript(opts: GuestScriptOptions): string {
  const exports = Object.entries(opts.env)
    .map(([k, v]) => {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) throw new Error(`lab: bad environment variable name ${JSON.stringify(k)}`);
      return `export ${k}=${shQuote(v)}`;
    })
    .join('\n');
  return `#!/bin/sh
# Generated by lab/vm.ts for one run: PID 1 of the lab guest after switch_root.
${exports}
/bin/busybox hostname ipvs-lab 2>/dev/null
stty -F /dev/console -onlcr ${opts.tty ? `cols ${opts.tty.cols} rows ${opts.tty.rows}` : ''} 2>/dev/null
ip link set lo up 2>/dev/null
echo 1 > /proc/sys/net/ipv4/ip_forward
printf '%s\\n' ${shQuote(`<<IPVS-LAB-START ${opts.nonce}>>`)}
if cd ${shQuote(opts.cwd)}; then
${opts.tty ? `  ( exec ${opts.command.map(shQuote).join(' ')} ) </dev/null
  rc=$?` : `  # Not a terminal on our side: give the command a pipe, not the console tty (no colours or
  # cursor movement), and keep its exit code (dash has no pipefail).
  { ( exec ${opts.command.map(shQuote).join(' ')} ) </dev/null; echo $? > /run/lab-rc; } 2>&1 | cat
  rc=$(cat /run/lab-rc 2>/dev/null || echo 125)`}
else
  printf '%s\\n' ${shQuote(`lab: no directory ${opts.cwd} in the guest`)}
  rc=125
fi
printf '<<IPVS-LAB-EXIT %s %d>>\\n' ${shQuote(opts.nonce)} "$rc"
sync
/bin/busybox poweroff -f
echo o > /proc/sysrq-trigger
`;
}

/** Removes run-<pid> directories left by harness processes that no longer exist. */
function pruneStaleRunDirs(): void {
  if (!existsSync(labCacheDir)) return;
  for (const name of readdirSync(labCacheDir)) {
    const m = /^run-(\d+)$/.exec(name);
    if (!m) continue;
    try {
      process.kill(Number(m[1]), 0);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ESRCH') rmSync(join(labCacheDir, name), { recursive: true, force: true });
    }
  }
}

let running: ChildProcess | undefined;
let runningDir: string | undefined;

function killRunning(): void {
  if (running?.pid !== undefined && running.exitCode === null && running.signalCode === null) {
    try {
      process.kill(running.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  if (runningDir) rmSync(runningDir, { recursive: true, force: true });
}

function onExit(): void {
  killRunning();
}

function onSignal(signal: NodeJS.Signals): void {
  killRunning();
  process.stderr.write(`\nlab: ${signal}: killed the VM\n`);
  process.exit(signal === 'SIGINT' ? 130 : 143);
}

/** Boots the lab VM, runs `command` in it, streams its output; resolves to its exit code. */
export async function runInVm(opts: RunInVmOptions): Promise<number> {
  if (running) throw new Error('lab: one VM at a time per process');
  if (opts.command.length === 0) throw new Error('lab: no command to run');
  const image = opts.image ?? await prepareLab();
  const cwd = resolve(opts.cwd ?? projectRoot);
  const timeoutMs = opts.timeoutMs ?? 10 * 60_000;
  const memoryMb = opts.memoryMb ?? 2048;
  const verbose = opts.verbose ?? process.env.LAB_VERBOSE === '1';
  const out = opts.out ?? process.stdout;
  const modsDir = join(image.kernel.dir, 'lib', 'modules');
  for (const p of [projectRoot, modsDir]) {
    if (!SAFE_PATH.test(p)) throw new Error(`lab: path ${JSON.stringify(p)} has characters the kernel command line cannot carry`);
  }
  if (!existsSync(image.kernel.vmlinuz)) throw new Error(`lab: ${image.kernel.vmlinuz} is missing; run \`npm run lab -- prepare\``);

  pruneStaleRunDirs();
  const runDir = join(labCacheDir, `run-${process.pid}`);
  rmSync(runDir, { recursive: true, force: true });
  mkdirSync(runDir, { recursive: true });
  const nonce = randomBytes(6).toString('hex');
  const env: Record<string, string> = {
    PATH: guestPath(),
    HOME: '/root',
    TERM: process.stdout.isTTY && process.env.TERM ? process.env.TERM : 'dumb',
    IPVS_LAB: '1',
    ...(process.env.CI !== undefined ? { CI: process.env.CI } : {}),
    ...(opts.env ?? {}),
  };
  const stdout = out as NodeJS.WriteStream;
  const tty = stdout.isTTY ? { cols: stdout.columns || 80, rows: stdout.rows || 24 } : undefined;
  writeFileSync(join(runDir, 'guest.sh'), guestScript({ nonce, cwd, command: opts.command, env, tty }), { mode: 0o755 });

  const args = [
    '-accel', 'tcg,thread=multi', '-cpu', 'max', '-machine', 'q35',
    '-m', String(memoryMb), '-smp', String(opts.cpus ?? 2),
    '-nodefaults', '-no-reboot', '-display', 'none', '-monitor', 'none', '-serial', 'stdio', '-nic', 'none',
    '-kernel', image.kernel.vmlinuz, '-initrd', image.initramfs,
    '-virtfs', 'local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap',
    '-virtfs', `local,path=${projectRoot},mount_tag=work,security_model=none,multidevs=remap`,
    '-append', `console=ttyS0 quiet loglevel=3 panic=-1 lab.work=${projectRoot} lab.run=${runDir} lab.mods=${modsDir}`,
  ];

  process.on('exit', onExit);
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  runningDir = runDir;
  const write = (s: string) => { out.write(s); };
  const filter = new SerialFilter(nonce, write, verbose);
  let timedOut = false;
  try {
    const child = spawn('qemu-system-x86_64', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    running = child;
    child.stdout?.setEncoding('utf8').on('data', (d: string) => filter.push(d));
    let qemuErr = '';
    child.stderr?.setEncoding('utf8').on('data', (d: string) => { qemuErr += d; });
    const timer = setTimeout(() => {
      timedOut = true;
      if (child.pid !== undefined) {
        try { process.kill(child.pid, 'SIGKILL'); } catch { /* gone */ }
      }
    }, timeoutMs);
    const qemuCode = await new Promise<number>((res, rej) => {
      child.on('error', rej);
      child.on('close', (code, signal) => res(code ?? (signal ? 128 : 1)));
    });
    clearTimeout(timer);
    filter.end();
    if (timedOut) {
      process.stderr.write(`\nlab: timed out after ${Math.round(timeoutMs / 1000)} s; killed qemu (pid ${child.pid})\n`);
      return EXIT_TIMEOUT;
    }
    if (filter.exitCode !== undefined) return filter.exitCode;
    process.stderr.write(`\nlab: the VM stopped (qemu exit ${qemuCode}) without reporting the command's exit code\n`);
    if (!filter.sawStart && !verbose) process.stderr.write(`lab: boot output:\n${filter.boot}\n`);
    if (qemuErr.trim()) process.stderr.write(`lab: qemu stderr:\n${qemuErr}\n`);
    return EXIT_VM_FAILURE;
  } finally {
    killRunning();
    running = undefined;
    runningDir = undefined;
    process.removeListener('exit', onExit);
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
}
