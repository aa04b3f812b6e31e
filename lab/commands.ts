// The lab's commands (`npm run lab -- <command>`, and `ipvs-operator lab <command>` from a source
// checkout): the lab VM harness (a real IPVS kernel under qemu TCG) and the tools built on it.
// Each command is one entry in COMMANDS. Never part of the operator's image: main.ts loads this
// module only when `lab` is invoked.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { prepareLab, runInVm, EXIT_VM_FAILURE } from './vm.js';
import { LabSetupError } from './host.js';
import { projectRoot } from './paths.js';
import { JEST_KERNEL } from './kernel-jest.js';
import { DEFAULT_TAG as DEFAULT_IMAGE_TAG, IMAGE_ROOT, buildImage, exportImage, smokeImage } from './image.js';
import { type CliCommand, type Program, UsageError, dispatch } from '../src/util/dispatch.js';
import { COMPARE_HELP, COMPARE_OPTIONS, COMPARE_USAGE, CompareUsageError } from './compare/flags.js';

export type LabCommand = CliCommand;

interface VmFlags {
  timeoutMs: number | undefined;
  memoryMb: number | undefined;
  cpus: number | undefined;
  rest: string[];
}

/** Parses `--timeout SECONDS`, `--memory MB`, `--cpus N` up to `--` (or the first non-flag). */
function parseVmFlags(args: string[], allowUnknown: boolean): VmFlags {
  const flags: VmFlags = { timeoutMs: undefined, memoryMb: undefined, cpus: undefined, rest: [] };
  let i = 0;
  const num = (name: string): number => {
    const v = Number(args[++i]);
    if (!Number.isFinite(v) || v <= 0) throw new UsageError(`${name} needs a positive number`);
    return v;
  };
  for (; i < args.length; i++) {
    const a = args[i];
    if (a === '--') { i++; break; }
    if (a === '--timeout') flags.timeoutMs = num('--timeout') * 1000;
    else if (a === '--memory') flags.memoryMb = Math.round(num('--memory'));
    else if (a === '--cpus') flags.cpus = Math.max(1, Math.round(num('--cpus')));
    else if (a?.startsWith('--') && !allowUnknown) throw new UsageError(`unknown option ${a}`);
    else break;
  }
  flags.rest = args.slice(i);
  return flags;
}


export const COMMANDS: Record<string, LabCommand> = {
  image: {
    summary: 'build the operator image (docker or podman) and smoke-test it',
    usage: 'image build [--tag TAG] [--engine docker|podman] [--local-base] | image smoke|export [--tag TAG] [--engine docker|podman]',
    help: 'build: docker/podman build of the Dockerfile (--local-base: no registry; a Debian trixie base made with\n' +
      'debootstrap and imported into podman). smoke: runs the built image as a user first does (--help of every\n' +
      'command, explain and run --dry-run on examples/lab, status without IPVS) and checks each answer.\n' +
      `export: unpacks the image's filesystem into ${IMAGE_ROOT.replace(projectRoot + '/', '')} (the lab cluster runs one node's operator from it).\n` +
      `Default tag ${DEFAULT_IMAGE_TAG}.`,
    async run(args) {
      const { values, positionals } = parseArgs({
        args, allowPositionals: true, strict: true,
        options: { tag: { type: 'string', default: DEFAULT_IMAGE_TAG }, engine: { type: 'string' }, 'local-base': { type: 'boolean', default: false } },
      });
      const engine = values.engine;
      if (engine !== undefined && engine !== 'docker' && engine !== 'podman') throw new UsageError('--engine must be docker or podman');
      const log = (line: string) => process.stdout.write(`${line}\n`);
      if (positionals.length === 1 && positionals[0] === 'build') {
        await buildImage({ tag: values.tag!, engine, localBase: values['local-base']!, log });
        return 0;
      }
      if (positionals.length === 1 && positionals[0] === 'smoke') {
        if (values['local-base']) throw new UsageError('--local-base is a build flag');
        const results = await smokeImage(values.tag!, engine, log);
        const failed = results.filter((r) => !r.ok).length;
        log(`image smoke: ${results.length - failed} passed, ${failed} failed`);
        return failed ? 1 : 0;
      }
      if (positionals.length === 1 && positionals[0] === 'export') {
        if (values['local-base']) throw new UsageError('--local-base is a build flag');
        await exportImage(values.tag!, engine, IMAGE_ROOT, log);
        return 0;
      }
      throw new UsageError('image takes one subcommand: build, smoke or export');
    },
  },
  cluster: {
    summary: 'a kind-like cluster in the VM: nodes, pods, the operator on each from its DaemonSet (lab/cluster/)',
    usage: 'cluster up [--nodes N] [--kube-proxy] [--prometheus] | cluster down | cluster status | cluster apiserver restart | cluster exec <node|pod|external> -- <cmd...> | cluster kubectl -- <args...>',
    help: 'up: boots one long-lived VM (detached) whose agent builds N node netns (default 4: myk8s-control-plane and\n' +
      'myk8s-worker..3) on the bridge 172.18.0.0/16, pods 10.10.<node>.0/24, the external client netns, the API\n' +
      'server and the operator on every node from manifests/daemonset.yaml; it prints the boot-to-ready time.\n' +
      '--kube-proxy: the coexistence install: kube-proxy\'s iptables mode on every node, following the API, owns the\n' +
      'unlabelled Services; the operator only those labelled service-proxy-name=ipvs-operator.\n' +
      '--prometheus: Debian\'s prometheus on 172.18.0.1:9090 scraping every node\'s operator every 2 s.\n' +
      'apiserver restart: stops the API server and starts it again over its etcd (Debian\'s etcd-server), same\n' +
      'port and certificate: objects, resourceVersions and Events are kept, watches resume (docs/lab-cluster.md).\n' +
      'status/exec/kubectl/apiserver are answered by that agent (requests through .cache/lab/cluster/); down stops it all\n' +
      'and powers the VM off. Build first (npm run build).',
    async run(args) {
      const { clusterCommand } = await import('./cluster/cli.js');
      try {
        return await clusterCommand(args);
      } catch (e) {
        if (e instanceof Error && /^(--nodes|cluster takes)/.test(e.message)) throw new UsageError(e.message);
        throw e;
      }
    },
  },
  balance: {
    summary: 'the cross-node balance experiment: clients on several nodes, each through its own IPVS (docs/balance-measure.md)',
    usage: 'balance [--nodes 4] [--modes rr,lc,sed] [--profile equal|one-slow|heterogeneous] [--requests 240] [--clients 4] [--placements one,spread] [--concurrency 1,2,8] [--reps 1] [--keep-alive] [--balance-period 2] [--warmup 240] [--out DIR]',
    help: 'Boots the lab VM, brings up a lab cluster (as cluster up), serves port 8090 from the three webpods with the\n' +
      'profile\'s service times, and for each mode (a scheduler, then +key=value ipvs-operator.io/ annotations, e.g.\n' +
      'sed+endpoint-order=sorted; or iptables: kube-proxy\'s iptables mode, the lab\'s stand-in, on every node beside the\n' +
      'operators, which then take only the Services labelled for them) runs closed-loop clients in the nodes\' own\n' +
      'netns: all on the control plane ("one")\n' +
      'or one per node ("spread"). Prints requests per backend, p50/p95/p99, the imbalance index and the first pod\n' +
      'each client got; writes results.json and table.md to --out (default bench/results/balance). Modes with\n' +
      '+balance=cluster first run --warmup requests (default 240) while the operators, with --balance-period\n' +
      '(default 2 s), learn the cluster load view; the weights then in force go into results.json. Build first.',
    async run(args) {
      const guest = join(projectRoot, 'dist', 'lab', 'cluster', 'balance.js');
      return runInVm({ command: [process.execPath, guest, ...args], cwd: projectRoot, timeoutMs: 3 * 3600_000, memoryMb: 3072 });
    },
  },
  'balance-chart': {
    summary: 'the chart of balance runs: SVG and PNG from their results.json (no VM)',
    usage: 'balance-chart DIR[=NOTE]... [--out examples/balance/chart]',
    help: 'Reads DIR/results.json of each `lab balance` run given (a panel each, in order; NOTE, after =, is the\n' +
      'line under its title: where and how it was run) and writes OUT.svg and OUT.png: per mode each pod\'s share of\n' +
      'the requests, and p50 and p95 with their min-max over the repeats on a log axis.',
    async run(args) {
      const { values, positionals } = parseArgs({ args, options: { out: { type: 'string', default: 'examples/balance/chart' } }, strict: true, allowPositionals: true });
      if (!positionals.length) throw new UsageError('balance-chart: give at least one DIR holding a results.json');
      const { panelFromResults, renderBalanceChart } = await import('./cluster/balance-chart.js');
      const { renderPng } = await import('./compare/png.js');
      const panels = positionals.map((arg) => {
        const [dir, note] = [arg.split('=')[0]!, arg.split('=').slice(1).join('=')];
        return panelFromResults(JSON.parse(readFileSync(join(dir, 'results.json'), 'utf8')), note || dir);
      });
      const svg = renderBalanceChart(panels, 'One client per node, each through its own IPVS: requests per pod, p50 and p95');
      writeFileSync(`${values.out}.svg`, svg);
      writeFileSync(`${values.out}.png`, renderPng(svg));
      process.stdout.write(`wrote ${values.out}.svg and ${values.out}.png\n`);
      return 0;
    },
  },
  compare: {
    summary: 'kube-proxy iptables random vs each IPVS scheduler on the same pods, in the VM (lab/compare/)',
    usage: COMPARE_USAGE.replace(/^lab /, ''),
    help: COMPARE_HELP,
    async run(args) {
      const { values, positionals } = parseArgs({ args, options: COMPARE_OPTIONS, strict: true, allowPositionals: true });
      if (positionals.length) throw new UsageError(`compare takes no arguments, got ${positionals.length}`);
      // Loaded on use: the other lab commands never load the PNG renderer.
      const { compareCommand } = await import('./compare/command.js');
      try {
        return await compareCommand(values as Record<string, string | boolean | undefined>);
      } catch (e) {
        throw e instanceof CompareUsageError ? new UsageError(e.message) : e;
      }
    },
  },
  prepare: {
    summary: 'install host packages, fetch the kernel, build the initramfs',
    usage: 'prepare',
    help: 'Installs missing Debian packages (needs root), downloads and unpacks Debian\'s current\n' +
      'linux-image-<abi>-amd64 into .cache/lab/ (once per package version) and builds the initramfs.',
    async run(args) {
      if (args.length) throw new UsageError('prepare takes no arguments');
      const image = await prepareLab();
      process.stdout.write(`lab: kernel ${image.kernel.package} (${image.kernel.kver})\nlab: initramfs ${image.initramfs}\n`);
      return 0;
    },
  },
  run: {
    summary: 'run a command in the VM, in the project directory',
    usage: 'run [--timeout SECONDS] [--memory MB] [--cpus N] -- <command...>',
    help: 'Boots the VM, runs <command> (argv, no shell; use `sh -c "..."` for one) in the project\n' +
      'directory, streams its output and exits with its exit code (124 on timeout, default 600 s;\n' +
      '125 when the VM failed). Build first: the guest runs the JS in dist/.',
    async run(args) {
      const f = parseVmFlags(args, false);
      if (f.rest.length === 0) throw new UsageError('run needs a command after --');
      return runInVm({ command: f.rest, cwd: projectRoot, timeoutMs: f.timeoutMs, memoryMb: f.memoryMb, cpus: f.cpus });
    },
  },
  test: {
    summary: 'run the kernel jest project in the VM',
    usage: 'test [--timeout SECONDS] [--memory MB] [--cpus N] [jest args...]',
    help: `Runs \`${JEST_KERNEL.join(' ')} [jest args...]\` in the VM\n` +
      '(dist/test/kernel/**/*.test.js: run `npm run build` first; never tsc in the guest).\n' +
      'Default timeout 70 minutes (a quiet machine needs about 25; a busy one, under TCG, several times that).',
    async run(args) {
      const f = parseVmFlags(args, true);
      return runInVm({
        command: [...JEST_KERNEL, ...f.rest], cwd: projectRoot,
        timeoutMs: f.timeoutMs ?? 70 * 60_000, memoryMb: f.memoryMb ?? 3072, cpus: f.cpus,
      });
    },
  },
};

/** The lab's commands for the dispatcher; a setup failure exits like a VM failure. */
export const LAB_PROGRAM: Program = {
  invoke: 'npm run lab --',
  prefix: () => 'lab',
  intro: '(node dist/lab/cli.js <command>) The lab VM: Debian\'s kernel (with IPVS) under qemu TCG, host /\n' +
    'shared read-only, the project read-write at the same path, no network card.',
  footer: '`<command> --help` for details. Env: LAB_VERBOSE=1 shows the boot log.',
  commands: COMMANDS,
  exitCode: (e) => (e instanceof LabSetupError ? EXIT_VM_FAILURE : undefined),
};

/** Runs one lab command; the exit code. */
export function labMain(argv: readonly string[]): Promise<number> {
  return dispatch(LAB_PROGRAM, argv);
}

