// Write budget of the cluster load view (issue 27), modelled: N nodes × S opted-in Services × B
// backends, K reporter nodes per Service by rendezvous hash (src/balance/reporting.ts). Every
// period each reporter reads its counters; a node writes its one status object (all the Services
// it reports for) only when shouldReport says its values moved, or to stay fresh. The aggregator
// runs the real stepView per Service and writes a weights object only when its hysteresis lets
// it. Prints API writes/s and bytes/s (JSON bodies of merge patches; HTTP and TLS framing not
// counted) and the watch fan-out (every node watches every weights object).
//
// The load model, stated: each Service gets R new connections/s spread evenly over the nodes as
// clients and over its backends by the published weights (as wrr would); a backend's time in
// system is fixed (20..200 ms, one backend per Service 10× slower); per period a node's new
// connections to a backend are Poisson(rate × period) and its active count Poisson(rate × time).
// Run: npm run build && node dist/bench/balance-budget.js [nodes] [services] [backends] [rate] [periods] [K,K,all] [reads]
// (K=all at the defaults took 80-100 s of one core here.)
import { type NodeReport, type ReportLimits } from '../src/balance/estimate.js';
import { DEFAULT_DAMPING, type ViewState, initialView, stepView, targetWeights } from '../src/balance/damping.js';
import { type MoveThreshold, type Reading, pickReporters, shouldReport } from '../src/balance/reporting.js';
import { prng } from '../test/support/fixtures.js';

const N = Number(process.argv[2] ?? 1_000);
const S = Number(process.argv[3] ?? 100);
const B = Number(process.argv[4] ?? 20);
const RATE = Number(process.argv[5] ?? 1_000);
const PERIODS = Number(process.argv[6] ?? 13);
const READS = Number(process.argv[8] ?? 1);
const KS = (process.argv[7] ?? '3,30,all').split(',').map((k) => (k === 'all' ? N : Number(k)));
const PERIOD_MS = 10_000;
const WARMUP = 3;
const LIMITS: ReportLimits = { periodMs: PERIOD_MS, stalePeriods: 3, maxSkewMs: 5_000, maxConnRate: 1_000_000, maxConns: 10_000_000 };
const MOVE: MoveThreshold = { relative: 0.2, minActive: 2, minRate: 1, maxSilentMs: 2 * PERIOD_MS };

const rand = prng(0x2701);
function poisson(mean: number): number {
  if (mean > 30) return Math.max(0, Math.round(mean + Math.sqrt(mean) * Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand())));
  const l = Math.exp(-mean);
  let k = 0;
  for (let p = rand(); p > l; p *= rand()) k += 1;
  return k;
}

const nodes = Array.from({ length: N }, (_, i) => `node-${String(i).padStart(4, '0')}`);
const services = Array.from({ length: S }, (_, s) => ({
  key: `ns${s % 10}/svc-${s}/http/IPv4`,
  backends: Array.from({ length: B }, (_, b) => `10.${64 + (s >> 8)}.${s & 255}.${b + 10}:8080`),
  seconds: Array.from({ length: B }, (_, b) => (b === 0 ? 10 : 1) * (0.02 + 0.18 * rand())),
}));

interface Totals { error: number; statusWrites: number; statusBytes: number; weightWrites: number; weightBytes: number; reporters: number; seenPerBackend: number }

function run(k: number): Totals {
  const reportersOf = services.map((s) => pickReporters(s.key, nodes, k));
  const byNode = new Map<string, number[]>();
  reportersOf.forEach((rs, s) => rs.forEach((n) => byNode.set(n, [...(byNode.get(n) ?? []), s])));
  // Per (node, service): cumulative counters per backend, the last reading it sent.
  const conns = new Map<string, Float64Array>();
  const sent = new Map<string, Reading>();
  let views: ViewState[] = services.map((s) => initialView(s.backends));
  const t: Totals = { error: 0, statusWrites: 0, statusBytes: 0, weightWrites: 0, weightBytes: 0, reporters: byNode.size, seenPerBackend: 0 };
  for (let p = 1; p <= PERIODS; p++) {
    const now = p * PERIOD_MS;
    const inbox: NodeReport[][] = services.map(() => []);
    for (const [node, ss] of byNode) {
      const reports: { s: number; r: NodeReport }[] = [];
      const reading: Reading = { at: now, active: new Map(), rate: new Map() };
      for (const s of ss) {
        const svc = services[s]!;
        const w = views[s]!.weights;
        const sum = svc.backends.reduce((x, b) => x + w.get(b)!, 0);
        const c = conns.get(`${node} ${s}`) ?? new Float64Array(B);
        conns.set(`${node} ${s}`, c);
        const backends = svc.backends.map((backend, b) => {
          const rate = (RATE / N) * (w.get(backend)! / sum);
          const fresh = poisson(rate * PERIOD_MS / 1000);
          c[b]! += fresh;
          if (p > WARMUP) t.seenPerBackend += fresh;
          // The mean of READS reads of the active count over the period (reads far enough apart to
          // be independent): a sum of READS Poisson samples is Poisson(READS × mean).
          const active = poisson(READS * rate * svc.seconds[b]!) / READS;
          reading.active.set(`${s} ${backend}`, active);
          reading.rate.set(`${s} ${backend}`, fresh / (PERIOD_MS / 1000));
          return { backend, active, inactive: poisson(rate * 60), conns: c[b]!, inBytes: c[b]! * 400, outBytes: c[b]! * 5_200 };
        });
        reports.push({ s, r: { node, at: now, backends } });
      }
      if (!shouldReport(sent.get(node), reading, MOVE)) continue;
      sent.set(node, reading);
      // The node's status: every Service it reports for, as a merge patch body.
      const body = JSON.stringify({ status: { reports: Object.fromEntries(reports.map(({ s, r }) => [services[s]!.key, {
        at: new Date(r.at).toISOString(), backends: r.backends.map((b) => ({ b: b.backend, a: b.active, i: b.inactive, c: b.conns, ib: b.inBytes, ob: b.outBytes })),
      }])) } });
      if (p > WARMUP) { t.statusWrites += 1; t.statusBytes += body.length; }
      for (const { s, r } of reports) inbox[s]!.push(r);
    }
    views = views.map((v, s) => {
      const step = stepView(v, inbox[s]!, services[s]!.backends, now, LIMITS, DEFAULT_DAMPING);
      if (step.write && p > WARMUP) {
        t.weightWrites += 1;
        t.weightBytes += JSON.stringify({ spec: { weights: Object.fromEntries(step.weights) } }).length;
      }
      return step.state;
    });
  }
  // How far the final weights are from the ideal ones (the target from the true times in system).
  views.forEach((v, s) => {
    const svc = services[s]!;
    const ideal = targetWeights(new Map(svc.backends.map((b, i) => [b, svc.seconds[i]!])), new Map(), DEFAULT_DAMPING);
    for (const b of svc.backends) t.error += Math.abs(v.weights.get(b)! - ideal.get(b)!) / (S * B);
  });
  return t;
}

const seconds = ((PERIODS - WARMUP) * PERIOD_MS) / 1000;
console.log(`cluster load view write budget: ${N} nodes × ${S} Services × ${B} backends, ${RATE} new conn/s per Service, ` +
  `period ${PERIOD_MS / 1000} s, ${READS} read(s) of active per period, ${PERIODS - WARMUP} periods measured after ${WARMUP} of warm-up`);
for (const k of KS) {
  const t0 = process.hrtime.bigint();
  const t = run(k);
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const f = (x: number): string => (x / seconds).toFixed(2);
  const kb = (x: number): string => (x / seconds / 1024).toFixed(1);
  console.log(`K=${k === N ? `all (${N})` : k}: ${t.reporters} reporting nodes; ` +
    `status writes ${f(t.statusWrites)}/s (bound ${(t.reporters / (PERIOD_MS / 1000)).toFixed(1)}/s), ${kb(t.statusBytes)} KiB/s, ` +
    `${t.statusWrites ? Math.round(t.statusBytes / t.statusWrites) : 0} B each; ` +
    `weight writes ${f(t.weightWrites)}/s (bound ${(S / (PERIOD_MS / 1000)).toFixed(1)}/s), ${kb(t.weightBytes)} KiB/s, ` +
    `watch fan-out to ${N} nodes ${kb(t.weightBytes * N)} KiB/s; ` +
    `final weights off the ideal by ${t.error.toFixed(1)} on average (of 1..20); ` +
    `reporters saw ${(t.seenPerBackend / (S * B * (PERIODS - WARMUP))).toFixed(1)} new conns per backend per period; ${ms.toFixed(0)} ms`);
}
