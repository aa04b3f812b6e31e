// The flags of `ipvs-operator lab compare` and the spec the host passes to the guest. Light on
// purpose: the CLI's entry point imports it statically (the VM and PNG code load only on use).
import {
  type LoadSpec, DEFAULT_LOAD, DEFAULT_MODES, PRESETS, PROFILE_NAMES, findPreset, parseModes, parseProfiles,
} from './types.js';

/** What the host passes to the guest (guest.ts). */
export interface GuestSpec {
  backends: number;
  profiles: string;
  modes: string;
  load: LoadSpec;
  /** Repetitions per mode and profile, interleaved. */
  reps: number;
  /** Measure the zero-delay baseline first. */
  baseline: boolean;
  /** Fixed profile unit (ms); undefined: scaled to the baseline (20 ms without one). */
  unitMs?: number;
}

/** A bad flag value: the CLI prints it with the usage (exit 2). */
export class CompareUsageError extends Error {}

export const COMPARE_USAGE = 'lab compare [--preset NAME] [--backends N] [--profiles LIST] [--modes LIST] [--requests N] [--concurrency N] ' +
  '[--keep-alive] [--reps N] [--unit-ms MS] [--no-baseline] [--out DIR] [--timeout SECONDS] [--render RESULTS.json]';

export const COMPARE_HELP = 'Boots the lab VM (a real IPVS kernel under qemu) and, on the same backend pods and the same\n' +
  'VIP 10.200.1.10:80, sends the same load (wrk, in a client netns) through kube-proxy\'s iptables\n' +
  'mode (statistic random chains, iptables-restore), its nftables mode (numgen random vmap, nft -f)\n' +
  'and this operator with each IPVS scheduler (the Service annotation). A zero-delay baseline (the\n' +
  'harness\'s own time) is measured first and the profiles\' service times scaled to it; each mode\n' +
  'runs --reps times, interleaved, and each figure is the median [min-max]. Prints a table per\n' +
  'profile and writes results.json, table.txt, chart.svg and chart.png.\n' +
  `  --preset NAME      ${PRESETS.map((p) => `${p.name}: ${p.summary}`).join(';\n                     ')}\n` +
  '                     (sets modes, profiles and load; flags given explicitly still win)\n' +
  '  --backends N       backend pods (default 3: webpod1-3)\n' +
  `  --profiles LIST    service-time profiles, comma-separated (default all: ${PROFILE_NAMES.join(',')})\n` +
  `  --modes LIST       default ${DEFAULT_MODES.join(',')}; also iptables-affinity, nftables-affinity,\n` +
  '                     rr-affinity (sessionAffinity: ClientIP)\n' +
  `  --requests N       requests per mode and profile (default ${DEFAULT_LOAD.requests})\n` +
  `  --concurrency N    requests in flight (default ${DEFAULT_LOAD.concurrency}; 1 = sequential)\n` +
  '  --keep-alive       reuse connections (a proxy then balances connections, not requests)\n' +
  '  --reps N           runs per mode and profile, interleaved A,B,C,A,B,C,... (default 3)\n' +
  '  --unit-ms MS       fix the profiles\' unit (fast backend time) instead of scaling it to the baseline\n' +
  '  --no-baseline      skip the zero-delay baseline (profiles then use 20 ms unless --unit-ms)\n' +
  '  --out DIR          results directory (default bench/results/compare)\n' +
  '  --timeout SECONDS  limit for the VM run (default 1800)\n' +
  '  --render FILE      only render an earlier results.json (no VM) into --out';

/** parseArgs options of the command. */
export const COMPARE_OPTIONS = {
  preset: { type: 'string' },
  backends: { type: 'string', default: '3' },
  profiles: { type: 'string' },
  modes: { type: 'string' },
  requests: { type: 'string' },
  concurrency: { type: 'string' },
  'keep-alive': { type: 'boolean' },
  reps: { type: 'string', default: '3' },
  'unit-ms': { type: 'string' },
  'no-baseline': { type: 'boolean', default: false },
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

/** The guest spec from the flags (a preset's values where a flag is not given); throws CompareUsageError on a bad value. */
export function parseCompareFlags(v: Record<string, string | boolean | undefined>): GuestSpec {
  let preset;
  try {
    preset = typeof v.preset === 'string' ? findPreset(v.preset) : undefined;
  } catch (e) {
    throw new CompareUsageError((e as Error).message);
  }
  const backends = int(v.backends ?? '3', 'backends', 1, 20);
  const requests = int(v.requests ?? preset?.load.requests ?? DEFAULT_LOAD.requests, 'requests', 1, 100_000);
  const concurrency = int(v.concurrency ?? preset?.load.concurrency ?? DEFAULT_LOAD.concurrency, 'concurrency', 1, Math.min(256, requests));
  const keepAlive = v['keep-alive'] === undefined ? preset?.load.keepAlive ?? DEFAULT_LOAD.keepAlive : v['keep-alive'] === true;
  const spec: GuestSpec = {
    backends,
    profiles: String(v.profiles ?? preset?.profiles ?? PROFILE_NAMES.join(',')),
    modes: String(v.modes ?? preset?.modes ?? DEFAULT_MODES.join(',')),
    load: { ...DEFAULT_LOAD, requests, concurrency, keepAlive },
    reps: int(v.reps ?? '3', 'reps', 1, 50),
    baseline: v['no-baseline'] !== true,
    ...(v['unit-ms'] !== undefined ? { unitMs: int(v['unit-ms'], 'unit-ms', 1, 1000) } : {}),
  };
  try {
    parseProfiles(spec.profiles, backends);
    parseModes(spec.modes);
  } catch (e) {
    throw new CompareUsageError((e as Error).message);
  }
  return spec;
}

