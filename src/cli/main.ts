#!/usr/bin/env node
// `ipvs-operator <command>`: run | status | explain | cleanup | lab compare. Each command is one
// entry in COMMANDS with its own flags (node:util parseArgs, strict) and --help. The only process.exit
// of the operator is here and in fatal.ts (an error nothing caught). Each command imports what it
// runs when it runs: `cleanup` loads about 100 modules, not the operator's 500 (in the lab VM,
// under TCG, every module loaded costs tens of ms).
import { realpathSync } from 'node:fs';
import { hostname } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { defaultProxyConfig } from '../config/types.js';
import { DEFAULT_STATE_DIR } from '../sync/record.js';
import { exitAfterThreads, exitOnUncaught } from './fatal.js';
import { type CliCommand, type Program, UsageError, dispatch } from '../util/dispatch.js';
import { type Command, addrFlag, parseSource, sourceHelp } from './flags.js';
import { RUN_COMMAND } from './run-command.js';

export type { Command };
export { UsageError };

export const COMMANDS: Record<string, Command> = {
  run: RUN_COMMAND,
  'node-setup': {
    summary: 'load the IPVS modules and set the node sysctls (for a privileged init container)',
    usage: 'node-setup [--strict-arp] [--state-dir DIR]',
    help: 'Loads ip_vs and every scheduler module the plugins name, sets the sysctls kube-proxy\'s IPVS mode\n' +
      'sets (net.ipv4.vs.conntrack, expire_nodest_conn, expire_quiescent_template, ip_forward), and with\n' +
      '--strict-arp arp_ignore=1 / arp_announce=2 (the values found are kept in --state-dir, so `cleanup`\n' +
      'can restore them). What an unprivileged operator pod cannot do: run it from the opt-in component\n' +
      'manifests/components/node-setup (a privileged init container). Exit code 1 names what failed.',
    options: {
      'strict-arp': { type: 'boolean', default: false }, 'state-dir': { type: 'string', default: DEFAULT_STATE_DIR },
    },
    async run(v) {
      const [{ PluginRegistry }, { nodeSetup }] =
        await Promise.all([import('../../plugins/index.js'), import('../node/node-setup.js')]);
      const registry = new PluginRegistry();
      const schedulers = [...new Set(registry.names().map((n) => registry.get(n)!.kernelScheduler))].sort();
      const r = await nodeSetup({ schedulers, strictArp: v['strict-arp'] === true, stateDir: String(v['state-dir']) });
      for (const line of r.lines) process.stdout.write(`${line}\n`);
      return r.ok ? 0 : 1;
    },
  },
  status: {
    summary: 'the kernel IPVS table with counters, each virtual server with its Service',
    usage: 'status [--operator-addr HOST:PORT] | status --service NAMESPACE/NAME [--kubeconfig FILE]',
    help: 'Prints the kernel table like `ipvsadm -Ln --stats`; the Service and scheduler plugin of each\n' +
      'virtual server come from the running operator (--operator-addr, default 127.0.0.1:10249).\n' +
      'With --service: that Service\'s backends across the cluster, from the API (the cluster load view):\n' +
      'each backend\'s published weight and estimate, and the active and new connections every node reports.',
    options: {
      'operator-addr': { type: 'string', default: '127.0.0.1:10249' }, service: { type: 'string' },
      kubeconfig: { type: 'string' },
    },
    async run(v) {
      if (v.service !== undefined) {
        const target = String(v.service);
        if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(target)) {
          throw new UsageError(`--service: expected <namespace/name>, got ${JSON.stringify(target)}`);
        }
        const { clusterStatus } = await import('./status.js');
        process.stdout.write(`${await clusterStatus(target, v.kubeconfig as string | undefined)}\n`);
        return 0;
      }
      const addr = addrFlag('operator-addr', v['operator-addr']);
      const { status } = await import('./status.js');
      process.stdout.write(`${await status(addr)}\n`);
      return 0;
    },
  },
  explain: {
    summary: 'how one Service maps to IPVS, beside the kube-proxy iptables chains it replaces',
    usage: 'explain <namespace/name> [--source kube|files:DIR] [--kubeconfig FILE] [--node-name NAME]',
    help: 'Reads the Service and its EndpointSlices from the source once and prints its virtual servers\n'
      + 'and real servers, and the KUBE-SERVICES / KUBE-SVC (statistic random) / KUBE-SEP chains\n'
      + `kube-proxy's iptables mode would write for it.\n  ${sourceHelp}`,
    positionals: 1,
    options: {
      source: { type: 'string', default: 'kube' },
      kubeconfig: { type: 'string' },
      'node-name': { type: 'string' },
    },
    async run(v, positionals) {
      const target = positionals[0]!;
      if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(target)) {
        throw new UsageError(`expected <namespace/name>, got ${JSON.stringify(target)}`);
      }
      const [{ explain }, { PluginRegistry }] =
        await Promise.all([import('./run.js'), import('../../plugins/index.js')]);
      process.stdout.write(`${await explain(target, {
        source: parseSource(String(v.source)), kubeconfig: v.kubeconfig as string | undefined,
        nodeName: String(v['node-name'] ?? process.env.NODE_NAME ?? hostname()), registry: new PluginRegistry(),
      })}\n`);
      return 0;
    },
  },
  cleanup: {
    summary: 'remove what the operator created: its virtual servers, VIP interface, chains and sets',
    usage: 'cleanup [--interface NAME] [--state-dir DIR]',
    help: 'Deletes the virtual servers the operator\'s ownership record lists (NodePorts included) and those\n' +
      'on the addresses of its dummy interface, the interface, the record, and the operator\'s iptables\n' +
      'chains and ipsets. Nothing else (other virtual servers, chains or sets) is touched.\n' +
      `--interface defaults to ${defaultProxyConfig.interfaceName}, --state-dir to ${DEFAULT_STATE_DIR}.`,
    options: {
      interface: { type: 'string', default: defaultProxyConfig.interfaceName },
      'state-dir': { type: 'string', default: DEFAULT_STATE_DIR },
    },
    async run(v) {
      const { cleanupNode } = await import('./status.js');
      const lines = await cleanupNode(String(v.interface), String(v['state-dir']));
      for (const line of lines) process.stdout.write(`${line}\n`);
      return 0;
    },
  },
};

/**
 * Where the lab door leads, from this module: lab/commands.ts, outside src/. A constant, not a
 * literal in import(), so that tsc does not follow it: the operator's build (the image's) compiles
 * src/ alone and has no lab/ to find.
 */
const LAB_COMMANDS = '../../lab/commands.js';

/**
 * `ipvs-operator lab <command>`: the lab's own dispatcher (lab/commands.ts: the VM, compare),
 * loaded on use. It ships with a source checkout, not with the operator's image, which leaves out
 * the lab, compare and demo code (the import-graph test keeps the operator's commands free of it).
 */
const LAB: CliCommand = {
  summary: 'the lab: a real IPVS kernel VM, lab compare (from a source checkout; `lab --help`)',
  usage: 'lab <command> [args...]',
  nested: true,
  help: 'The lab\'s commands (npm run lab -- <command> is the same): prepare, run, test, compare.\n' +
    '`ipvs-operator lab --help` lists them; they need a source checkout (the image leaves them out).',
  async run(args) {
    let mod: { labMain(argv: readonly string[]): Promise<number> };
    try {
      mod = await import(LAB_COMMANDS) as typeof mod;
    } catch (e) {
      if ((e as { code?: string }).code !== 'ERR_MODULE_NOT_FOUND') throw e;
      throw new UsageError(
        'the lab commands ship with the source checkout (npm run lab -- <command>), not with this build');
    }
    return mod.labMain(args);
  },
};

/** The operator's commands as the dispatcher runs them: flags parsed strictly, positionals counted. */
function toCliCommand(name: string, cmd: Command): CliCommand {
  return {
    summary: cmd.summary, usage: cmd.usage, help: cmd.help,
    async run(args) {
      const { values, positionals } = parseArgs({ args, options: cmd.options, strict: true, allowPositionals: true });
      if (positionals.length !== (cmd.positionals ?? 0)) {
        throw new UsageError(`${name} takes ${cmd.positionals ?? 0} argument(s), got ${positionals.length}`);
      }
      return cmd.run(values as Record<string, string | boolean | undefined>, positionals);
    },
  };
}

/** `ipvs-operator` for the dispatcher. */
const PROGRAM: Program = {
  invoke: 'ipvs-operator',
  prefix: (command) => (command ? `ipvs-operator ${command}` : 'ipvs-operator'),
  footer: '`ipvs-operator <command> --help` for its flags.',
  commands: { ...Object.fromEntries(Object.entries(COMMANDS).map(([n, c]) => [n, toCliCommand(n, c)])), lab: LAB },
};

/** Parses argv and runs the command; the exit code. */
export function main(argv: readonly string[]): Promise<number> {
  return dispatch(PROGRAM, argv);
}

// Run only as the entry point (tests import COMMANDS to check the DaemonSet's flags).
// argv[1] may be a symlink (npm's bin link, an image's /usr/local/bin entry): compare real paths.
if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  exitOnUncaught();
  main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
    // The command is over: a request still hanging on a dead API server must not keep the
    // process alive. Normally it exits at once, long before this (unref'd) timer.
    setTimeout(() => process.exit(code), 2000).unref();
  }, (e: unknown) => {
    process.stderr.write(`ipvs-operator: ${(e as Error).stack ?? String(e)}\n`);
    exitAfterThreads(1);
  });
}
