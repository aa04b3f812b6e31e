// The flags of `ipvs-operator lab compare` and the spec the host passes to the guest. Light on
// purpose: the CLI's entry point imports it statically (the VM and PNG code load only on use).
import { type LoadSpec, DEFAULT_LOAD, DEFAULT_MODES, PROFILE_NAMES, parseModes, parseProfiles } from './types.js';

/** What the host passes to the guest (guest.ts). */
export interface GuestSpec {
  backends: number;
  profiles: string;
  modes: string;
  load: LoadSpec;
}

/** A bad flag value: the CLI prints it with the usage (exit 2). */
export class CompareUsageError extends Error {}

export const COMPARE_USAGE = 'lab compare [--backends N] [--profiles LIST] [--modes LIST] [--requests N] [--concurrency N] ' +
  '[--keep-alive] [--out DIR] [--timeout SECONDS] [--render RESULTS.json]';

export const COMPARE_HELP = 'Boots the lab VM (a real IPVS kernel under qemu) and, on the same backend pods and the same\n' +
  'VIP 10.200.1.10:80, sends the same load through kube-proxy\'s iptables mode (statistic random\n' +
  'chains, applied with iptables-restore) and through this operator with each IPVS scheduler\n' +
  '(selected by the Service annotation). Prints a table per profile and writes results.json,\n' +
  'table.txt, chart.svg and chart.png.\n' +
  '  --backends N       backend pods (default 3: webpod1-3)\n' +
  `  --profiles LIST    service-time profiles, comma-separated (default all: ${PROFILE_NAMES.join(',')})\n` +
  `  --modes LIST       default ${DEFAULT_MODES.join(',')}; also iptables-affinity (sessionAffinity: ClientIP)\n` +
  `  --requests N       requests per mode and profile (default ${DEFAULT_LOAD.requests})\n` +
  `  --concurrency N    requests in flight (default ${DEFAULT_LOAD.concurrency}; 1 = sequential)\n` +
  '  --keep-alive       reuse connections (a proxy then balances connections, not requests)\n' +
  '  --out DIR          results directory (default bench/results/compare)\n' +
  '  --timeout SECONDS  limit for the VM run (default 1800)\n' +
  '  --render FILE      only render an earlier results.json (no VM) into --out';

/** parseArgs options of the command. */
export const COMPARE_OPTIONS = {
  backends: { type: 'string', default: '3' },
  profiles: { type: 'string', default: PROFILE_NAMES.join(',') },
  modes: { type: 'string', default: DEFAULT_MODES.join(',') },
  requests: { type: 'string', default: String(DEFAULT_LOAD.requests) },
  concurrency: { type: 'string', default: String(DEFAULT_LOAD.concurrency) },
  'keep-alive': { type: 'boolean', default: false },
  out: { type: 'string', default: 'bench/results/compare' },
  timeout: { type: 'string', default: '1800' },
  render: { type: 'string' },
} as const;

/** An integer flag in [min, max]; throws CompareUsageError otherwise. */
export function int(v: unknown, name: string, min: number, max: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) throw new CompareUsageError(`--${name} must be an integer ${min}..${max}, not ${String(v)}`);
  return n;
}

/** The guest spec from the flags; throws CompareUsageError on a bad value. */
export function parseCompareFlags(v: Record<string, string | boolean | undefined>): GuestSpec {
  const backends = int(v.backends, 'backends', 1, 20);
  const requests = int(v.requests, 'requests', 1, 100_000);
  const spec: GuestSpec = {
    backends, profiles: String(v.profiles), modes: String(v.modes),
    load: { ...DEFAULT_LOAD, requests, concurrency: int(v.concurrency, 'concurrency', 1, Math.min(256, requests)), keepAlive: v['keep-alive'] === true },
  };
  try {
    parseProfiles(spec.profiles, backends);
    parseModes(spec.modes);
  } catch (e) {
    throw new CompareUsageError((e as Error).message);
  }
  return spec;
}

