#!/usr/bin/env node
// `ipvs-operator <command>`: run | status | explain | cleanup | lab compare. Each command is one
// entry in COMMANDS with its own flags (node:util parseArgs, strict) and --help. The only process.exit
// of the operator is here.
import { realpathSync } from 'node:fs';
import { hostname } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { PluginRegistry } from '../../plugins/index.js';
import { DEFAULT_PLUGIN_LOAD_TIMEOUT_MS, loadPluginsFrom } from '../plugins/load.js';
import { defaultProxyConfig } from '../config/types.js';
import { type Log, type LogLevel, createLog } from '../util/log.js';
import { DEFAULT_STATE_DIR, FileOwnershipRecord, recordPath } from '../sync/record.js';
import { parseHostPort } from '../model/host-port.js';
import { cleanup, clusterStatus, status } from './status.js';
import { nodeSetup } from '../node/node-setup.js';
import { type SourceSpec, iptablesPath } from './wiring.js';
import { explain, runOperator } from './run.js';
import { type CliCommand, type Program, UsageError, dispatch } from '../util/dispatch.js';

/** A command: its flags (parseArgs options), usage, help and action. */
export interface Command {
  summary: string;
  usage: string;
  help: string;
  options: NonNullable<Parameters<typeof parseArgs>[0]>['options'];
  positionals?: number;
  run(values: Record<string, string | boolean | undefined>, positionals: string[]): Promise<number>;
}

const logFlags = {
  'log-format': { type: 'string', default: 'json' },
  'log-level': { type: 'string', default: 'info' },
} as const;

function makeLog(values: Record<string, unknown>): Log {
  const format = values['log-format'];
  const level = values['log-level'];
  if (format !== 'json' && format !== 'text') {
    throw new UsageError(`--log-format must be json or text, not ${String(format)}`);
  }
  if (!['error', 'warn', 'info', 'debug'].includes(String(level))) {
    throw new UsageError(`--log-level must be error, warn, info or debug, not ${String(level)}`);
  }
  return createLog(format, level as LogLevel);
}

export { UsageError };

/**
 * The value of an address flag, checked with parseHostPort (port 0 refused); a UsageError naming
 * the flag otherwise.
 */
export function addrFlag(flag: string, value: unknown): string {
  const r = parseHostPort(String(value));
  if (!r.ok) throw new UsageError(`--${flag} ${r.error}`);
  return String(value);
}

const sourceHelp = '--source kube (default; in-cluster or --kubeconfig) or files:DIR (a directory of\n' +
  'Service/EndpointSlice/Node/IPVSProxyConfig YAML, watched for changes)';

export const COMMANDS: Record<string, Command> = {
  run: {
    summary: 'run the operator on this node',
    usage: 'run [--source kube|files:DIR] [--kubeconfig FILE] [--node-name NAME] [--dry-run] '
      + '[--metrics-addr HOST:PORT] [--health-bound SECONDS] [--api-timeout SECONDS] [--balance-period SECONDS] '
      + '[--balance-reporters K] [--balance-namespace NS] [--state-dir DIR] [--plugins-dir DIR] '
      + '[--plugin-load-timeout SECONDS] [--no-iptables] [--log-format json|text] [--log-level LEVEL]',
    help: `Watches Services, EndpointSlices, this node's Node and the IPVSProxyConfig, and programs IPVS,\n` +
      `the VIP interface and (unless --no-iptables) the masquerade rules.\n  ${sourceHelp}\n` +
      '  --node-name   this node (default: $NODE_NAME, else the hostname)\n' +
      '  --dry-run     print each plan instead of applying it; nothing on the host changes\n' +
      '  --metrics-addr  /healthz, /readyz, /metrics and /origins (default 127.0.0.1:10249, as kube-proxy)\n' +
      '  --health-bound SECONDS  how long a failing sync, source or kernel socket may last before /healthz\n' +
      '                  fails (default 2 x syncPeriod, kube-proxy\'s rule)\n' +
      '  --api-timeout SECONDS  deadline of every API request (default 60; connect within 10, headers within 30)\n' +
      '  --balance-period SECONDS  the cluster load view\'s report and aggregation period (default 10; 0: off);\n' +
      '                  Services opt in with ipvs-operator.io/balance: cluster (docs/balance.md)\n' +
      '  --balance-reporters K  how many nodes report each opted-in Service, chosen by rendezvous hash on\n' +
      '                  the leader (default 0: every node); for large clusters (docs/balance.md, Budgets)\n' +
      '  --balance-namespace NS  where its Lease lives (default $POD_NAMESPACE, else ipvs-operator)\n' +
      `  --state-dir   where the ownership record is kept (default ${DEFAULT_STATE_DIR}; ` +
      'keep it on the host\'s /run)\n' +
      '  --plugins-dir   extra scheduler plugins (*.js / *.mjs); a broken one is reported and skipped\n' +
      '  --plugin-load-timeout SECONDS  longest import of one plugin file ' +
      `(default ${DEFAULT_PLUGIN_LOAD_TIMEOUT_MS / 1000});\n` +
      '                  one that takes longer stops the operator with exit code 1',
    options: {
      source: { type: 'string', default: 'kube' },
      kubeconfig: { type: 'string' },
      'node-name': { type: 'string' },
      'dry-run': { type: 'boolean', default: false },
      'metrics-addr': { type: 'string', default: '127.0.0.1:10249' },
      'health-bound': { type: 'string' },
      'api-timeout': { type: 'string', default: '60' },
      'balance-period': { type: 'string', default: '10' },
      'balance-namespace': { type: 'string' },
      'balance-reporters': { type: 'string', default: '0' },
      'state-dir': { type: 'string', default: DEFAULT_STATE_DIR },
      'plugins-dir': { type: 'string' },
      'plugin-load-timeout': { type: 'string', default: String(DEFAULT_PLUGIN_LOAD_TIMEOUT_MS / 1000) },
      'no-iptables': { type: 'boolean', default: false },
      ...logFlags,
    },
    async run(v) {
      const log = makeLog(v);
      const metricsAddr = addrFlag('metrics-addr', v['metrics-addr']);
      const pluginTimeout = Number(v['plugin-load-timeout']);
      if (!(pluginTimeout > 0 && pluginTimeout <= 3600)) {
        const got = JSON.stringify(v['plugin-load-timeout']);
        throw new UsageError(`--plugin-load-timeout must be 0 < SECONDS <= 3600, not ${got}`);
      }
      const healthBound = v['health-bound'] === undefined ? undefined : Number(v['health-bound']);
      if (healthBound !== undefined && !(healthBound >= 1 && healthBound <= 86_400)) {
        throw new UsageError(`--health-bound must be 1 <= SECONDS <= 86400, not ${JSON.stringify(v['health-bound'])}`);
      }
      const apiTimeout = Number(v['api-timeout']);
      if (!(apiTimeout >= 1 && apiTimeout <= 3600)) {
        throw new UsageError(`--api-timeout must be 1 <= SECONDS <= 3600, not ${JSON.stringify(v['api-timeout'])}`);
      }
      const balancePeriod = Number(v['balance-period']);
      if (!(balancePeriod === 0 || (balancePeriod >= 1 && balancePeriod <= 3600))) {
        const got = JSON.stringify(v['balance-period']);
        throw new UsageError(`--balance-period must be 0 or 1 <= SECONDS <= 3600, not ${got}`);
      }
      const reporters = Number(v['balance-reporters']);
      if (!(Number.isInteger(reporters) && reporters >= 0 && reporters <= 10_000)) {
        const got = JSON.stringify(v['balance-reporters']);
        throw new UsageError(`--balance-reporters must be an integer 0 <= K <= 10000 (0: every node), not ${got}`);
      }
      const registry = new PluginRegistry();
      if (v['plugins-dir']) {
        const problems = await loadPluginsFrom(String(v['plugins-dir']), registry, { timeoutMs: pluginTimeout * 1000 });
        for (const p of problems) log('warn', 'plugin skipped', { ...p });
      }
      try {
        return await runOperator({
          source: parseSource(String(v.source)),
          kubeconfig: v.kubeconfig as string | undefined,
          nodeName: String(v['node-name'] ?? process.env.NODE_NAME ?? hostname()),
          dryRun: v['dry-run'] === true,
          metricsAddr,
          ...(healthBound === undefined ? {} : { healthBoundMs: healthBound * 1000 }),
          apiTimeoutMs: apiTimeout * 1000,
          balancePeriodMs: balancePeriod * 1000,
          balanceReporters: reporters,
          balanceNamespace: String(v['balance-namespace'] ?? process.env.POD_NAMESPACE ?? 'ipvs-operator'),
          stateDir: String(v['state-dir']),
          iptables: v['no-iptables'] !== true,
          registry,
          log,
        });
      } catch (e) {
        // Nothing to connect to is a usage error (exit 2), never a silent localhost fallback.
        if ((e as Error)?.name === 'NoCredentialsError') throw new UsageError((e as Error).message);
        throw e;
      }
    },
  },
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
        process.stdout.write(`${await clusterStatus(target, v.kubeconfig as string | undefined)}\n`);
        return 0;
      }
      process.stdout.write(`${await status(addrFlag('operator-addr', v['operator-addr']))}\n`);
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
      const record = new FileOwnershipRecord(recordPath(String(v['state-dir'])));
      const lines = await cleanup(String(v.interface), await iptablesPath(), record, String(v['state-dir']));
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

function parseSource(s: string): SourceSpec {
  if (s === 'kube') return { kind: 'kube' };
  if (s.startsWith('files:') && s.length > 'files:'.length) return { kind: 'files', dir: s.slice('files:'.length) };
  throw new UsageError(`--source must be kube or files:DIR, not ${JSON.stringify(s)}`);
}

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
  main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
    // The command is over: a request still hanging on a dead API server must not keep the
    // process alive. Normally it exits at once, long before this (unref'd) timer.
    setTimeout(() => process.exit(code), 2000).unref();
  }, (e: unknown) => {
    process.stderr.write(`ipvs-operator: ${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  });
}
