// `ipvs-operator run`: its flags, their checks (a bad value is a UsageError, exit 2, before
// anything starts) and the call into runOperator (run.ts), which wires the operator. The operator
// itself (about 450 modules) is loaded once the flags are good, not when main.ts lists the commands:
// `cleanup`, `status` and `--help` do not pay for it (in the lab VM, seconds per process).
import { hostname } from 'node:os';
import { DEFAULT_PLUGIN_LOAD_TIMEOUT_MS } from '../plugins/load.js';
import { DEFAULT_STATE_DIR } from '../sync/record.js';
import { UsageError } from '../util/dispatch.js';
import { type Command, addrFlag, logFlags, logSettings, parseSource, sourceHelp } from './flags.js';

/** The `run` command. */
export const RUN_COMMAND: Command = {
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
    const logAs = logSettings(v);
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
    const [{ createLog }, { PluginRegistry }, { loadPluginsFrom }, { runOperator }] = await Promise.all([
      import('../util/log.js'), import('../../plugins/index.js'), import('../plugins/load.js'), import('./run.js')]);
    const log = createLog(logAs.format, logAs.level);
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
};
