// The operator's container image: build it with docker or podman, and smoke-test what was built
// (`npm run image -- build|smoke`, `ipvs-operator lab image ...`). Lab tooling: never in the image.
//
// Where no registry's node images can be pulled (CI here), `--local-base` makes the base itself:
// `debootstrap --variant=minbase trixie` (Debian 13: its nodejs is 20.x, used only to run npm;
// the Dockerfile installs Node.js 24 from the npm registry) imported as
// localhost/ipvs-operator-base:trixie, used for both stages (the Dockerfile installs Debian's
// nodejs and npm where the base has none). Facts of a sandbox like ours, handled here: podman's
// default OCI runtime crun refuses hybrid cgroups (runc is used), raising rlimits is not permitted
// (the container's are set to the host's own), and behind a TLS-intercepting proxy the build
// stage trusts the host's CA bundle (mounted read-only and named by NODE_EXTRA_CA_CERTS for the
// build stage only; the shipped stage never has it).
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type RunResult, run, runInherit, runOk, shQuote } from './proc.js';
import { projectRoot } from './paths.js';
import { aptUpdateOnce } from './host.js';

export const DEFAULT_TAG = 'localhost/ipvs-operator:dev';
const LOCAL_BASE = 'localhost/ipvs-operator-base:trixie';
const HOST_CA = '/etc/ssl/certs/ca-certificates.crt';

/** The packages a podman build with a local base needs on a Debian host. */
const PODMAN_PACKAGES = ['podman', 'buildah', 'runc', 'debootstrap', 'uidmap', 'fuse-overlayfs', 'slirp4netns'];

type Engine = 'docker' | 'podman';

/** run(), with a missing program as exit code 127 instead of a throw. */
const tryRun = (cmd: string, args: readonly string[]): Promise<RunResult> =>
  run(cmd, args).catch((e: Error) => ({ code: 127, stdout: '', stderr: e.message }));

/** docker when its engine answers, else podman (installed from Debian when missing and we are root). */
export async function chooseEngine(wanted: Engine | undefined, log: (line: string) => void): Promise<Engine> {
  if (wanted === 'docker' || (!wanted && (await tryRun('docker', ['info'])).code === 0)) return 'docker';
  if ((await tryRun('podman', ['--version'])).code !== 0 || (await tryRun('debootstrap', ['--version'])).code !== 0) {
    if (process.getuid?.() !== 0) throw new Error(`podman is not installed (apt-get install ${PODMAN_PACKAGES.join(' ')}) and this is not root`);
    log(`image: installing ${PODMAN_PACKAGES.join(' ')}`);
    await aptUpdateOnce();
    await runOk('apt-get', ['install', '-y', '--no-install-recommends', ...PODMAN_PACKAGES], { env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  }
  return 'podman';
}

/** Flags every podman container of ours needs in a sandbox like this one (see the file comment). */
async function podmanFlags(): Promise<string[]> {
  const nofile = (await runOk('bash', ['-c', 'ulimit -Hn'])).trim();
  const nproc = (await runOk('bash', ['-c', 'ulimit -Hu'])).trim();
  // At most the host's hard limits (lowering a limit is always allowed; raising it is not here).
  const limit = (name: string, hard: string, want: number) => {
    const v = /^\d+$/.test(hard) ? Math.min(Number(hard), want) : want;
    return ['--ulimit', `${name}=${v}:${v}`];
  };
  return ['--runtime', 'runc', '--network', 'host', ...limit('nofile', nofile, 65536), ...limit('nproc', nproc, 4096)];
}

/** Makes the local Debian base once (`podman rmi` it to make it again). */
async function localBase(log: (line: string) => void): Promise<string> {
  if ((await run('podman', ['image', 'exists', LOCAL_BASE])).code === 0) return LOCAL_BASE;
  const dir = mkdtempSync(join(tmpdir(), 'ipvsop-rootfs-'));
  try {
    log(`image: debootstrap --variant=minbase trixie (${dir})`);
    await runOk('debootstrap', ['--variant=minbase', 'trixie', dir, 'http://deb.debian.org/debian']);
    // debootstrap leaves the packages it downloaded and the package lists behind: not base material.
    await runOk('sh', ['-c', `rm -rf '${dir}'/var/cache/apt/archives/*.deb '${dir}'/var/lib/apt/lists/* '${dir}'/usr/share/doc/* '${dir}'/usr/share/man/*`]);
    await runOk('sh', ['-c', `tar -C '${dir}' -c . | podman import - ${LOCAL_BASE}`]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return LOCAL_BASE;
}

export interface BuildOptions {
  tag: string;
  engine?: Engine;
  localBase: boolean;
  log: (line: string) => void;
}

/** Builds the image from the project's Dockerfile; resolves with the engine used. */
export async function buildImage(o: BuildOptions): Promise<Engine> {
  const engine = await chooseEngine(o.engine, o.log);
  const args = ['build', '-t', o.tag];
  if (engine === 'podman') args.push(...await podmanFlags());
  if (o.localBase) {
    if (engine !== 'podman') throw new Error('--local-base needs podman (debootstrap + podman import)');
    const base = await localBase(o.log);
    args.push('--build-arg', `BUILD_IMAGE=${base}`, '--build-arg', `RUNTIME_IMAGE=${base}`);
  }
  if (existsSync(HOST_CA) && process.env.NODE_EXTRA_CA_CERTS) {
    // Build stage only (an ARG there); podman mounts it for RUN steps, docker users pass a secret.
    if (engine === 'podman') args.push('-v', `${HOST_CA}:/run/host-ca.crt:ro`, '--build-arg', 'NODE_EXTRA_CA_CERTS=/run/host-ca.crt');
  }
  args.push(projectRoot);
  o.log(`image: ${engine} ${args.join(' ')}`);
  const t0 = Date.now();
  const code = await runInherit(engine, args);
  if (code !== 0) throw new Error(`${engine} build failed (exit ${code})`);
  const size = (await runOk(engine, ['image', 'inspect', o.tag, '--format', '{{.Size}}'])).trim();
  o.log(`image: built ${o.tag} in ${Math.round((Date.now() - t0) / 1000)} s, ${(Number(size) / 1e6).toFixed(0)} MB`);
  return engine;
}

/** One smoke check: what ran, and whether its output and exit code were as expected. */
export interface SmokeResult { name: string; ok: boolean; detail: string }

/** Runs the built image the ways a user first does, and checks each answer. */
export async function smokeImage(tag: string, engineWanted: Engine | undefined, log: (line: string) => void): Promise<SmokeResult[]> {
  const engine = await chooseEngine(engineWanted, log);
  const base = ['run', '--rm', ...(engine === 'podman' ? await podmanFlags() : [])];
  const lab = join(projectRoot, 'examples', 'lab');
  const exec = (args: string[], extra: string[] = []) => run(engine, [...base, ...extra, tag, ...args]);
  const results: SmokeResult[] = [];
  const check = (name: string, ok: boolean, detail: string) => {
    results.push({ name, ok, detail });
    log(`image smoke: ${ok ? 'ok  ' : 'FAIL'} ${name}${ok ? '' : `: ${detail}`}`);
  };
  for (const cmd of ['run', 'status', 'explain', 'cleanup', 'node-setup']) {
    const r = await exec([cmd, '--help']);
    check(`${cmd} --help`, r.code === 0 && r.stdout.startsWith(`usage: ipvs-operator ${cmd}`), r.stdout.slice(0, 200) + r.stderr.slice(0, 200));
  }
  const top = await exec(['--help']);
  check('--help lists the commands', top.code === 0 && ['run', 'status', 'explain', 'cleanup'].every((c) => top.stdout.includes(`\n  ${c} `)), top.stdout.slice(0, 300));
  const labCmd = await exec(['lab', 'prepare']);
  check('lab says it is not in the image', labCmd.code === 2 && labCmd.stderr.includes('ship with the source checkout'), labCmd.stderr.slice(0, 300));
  const mount = ['-v', `${lab}:/lab:ro`];
  const explain = await exec(['explain', 'default/webpod-rr', '--source', 'files:/lab', '--node-name', 'lab-node'], mount);
  check('explain on examples/lab', explain.code === 0 && /TCP 10\.200\.1\.\d+:80 rr/.test(explain.stdout) && explain.stdout.includes('KUBE-SVC-'), explain.stdout.slice(0, 300) + explain.stderr.slice(0, 300));
  const dry = await run(engine, [...base, ...mount, '--entrypoint', 'timeout', tag, '-s', 'TERM', '20',
    'ipvs-operator', 'run', '--source', 'files:/lab', '--dry-run', '--no-iptables', '--node-name', 'lab-node']);
  check('run --dry-run prints a plan', dry.stdout.includes('# dry run: this kernel has no IPVS') && /^add-service TCP 10\.200\.1\.\d+:80 /m.test(dry.stdout) && /^add-vip ipvs-op0 /m.test(dry.stdout),
    dry.stdout.slice(0, 400) + dry.stderr.slice(0, 400));
  const status = await exec(['status']);
  check('status says the kernel has no IPVS', status.code === 1 && status.stderr.includes('this kernel has no IPVS'), `exit ${status.code}: ${status.stderr.slice(0, 300)}`);
  return results;
}

/** Where `image export` unpacks the image's filesystem (gitignored): a lab cluster node can run the operator from it. */
export const IMAGE_ROOT = join(projectRoot, '.cache', 'image', 'rootfs');

/**
 * Unpacks the built image's filesystem into `dir` (replacing what was there): `create` a
 * container without starting it, `export` its filesystem, untar. Returns the directory.
 */
export async function exportImage(tag: string, engineWanted: Engine | undefined, dir: string, log: (line: string) => void): Promise<string> {
  const engine = await chooseEngine(engineWanted, log);
  const id = (await runOk(engine, ['create', '--pull=never', ...(engine === 'podman' ? await podmanFlags() : []), tag])).trim();
  try {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    await runOk('bash', ['-o', 'pipefail', '-c', `${engine} export ${shQuote(id)} | tar -C ${shQuote(dir)} -x`]);
  } finally {
    await run(engine, ['rm', id]);
  }
  log(`image export: ${tag} unpacked into ${dir}`);
  return dir;
}
