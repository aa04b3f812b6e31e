// The ipset step at the bench's size, in the lab VM (issue 29): the whole refill the sync did before
// against the difference it sends now. One guest run, default prefix, from a clean kernel:
//   node dist/lab/cli.js run --timeout 3000 --memory 4096 -- node dist/bench/ipset-diff.js [SERVICES] [--local-protocols]
// The guest's root is the host's over 9p: ipset looks up each member's protocol (tcp:80) in
// /etc/protocols, a 9p read per member (about 4 ms under TCG, most of a restore's time). The lab's
// /init now copies that file into the guest's tmpfs (lab/initramfs.ts), as on a node's disk;
// --local-protocols also binds a tmpfs copy over it (the runs in docs/performance.md predate /init's copy).
// Prints one line per phase (stderr) and a JSON summary (stdout): (a) the first sync, then the old
// whole `ipset restore` (-tmp + swap of every set) over the full sets, (b) a restart's sync with
// nothing to change (its read, parse and plan timed apart), (c) one Service added, (d) `ipset save`
// of every set against `save` lines of ours, with a foreign copy of the biggest set present.
import { spawnSync } from 'node:child_process';
import { PluginRegistry } from '../plugins/index.js';
import { buildDesired } from '../src/desired/state.js';
import { type ProxyConfig, defaultProxyConfig } from '../src/config/types.js';
import type { Runner } from '../src/iptables/exec.js';
import { listSetNames, saveSets } from '../src/iptables/ipset.js';
import { planIpsets } from '../src/iptables/ipset-plan.js';
import { parseIpsetSave } from '../src/iptables/ipset-save.js';
import { desiredSets, renderIpsets } from '../src/iptables/render.js';
import { IptablesRestore, spawnRunner } from '../src/iptables/restore.js';
import { NODE_NAME, makeBenchService, makeBenchSlice, makeCluster, msSince, progress } from './fixtures.js';

const n = Number(process.argv[2] ?? 30000);
const localProtocols = process.argv.includes('--local-protocols');
const config: ProxyConfig = { ...defaultProxyConfig, clusterCIDRs: ['10.10.0.0/16'] };
const registry = new PluginRegistry();
const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

/** A runner timing each ipset call (command, args, ms). */
const timed: { what: string; ms: number; stdout: string }[] = [];
const run: Runner = async (cmd, args, input) => {
  const t = process.hrtime.bigint();
  const r = await spawnRunner(cmd, args, input);
  if (cmd === 'ipset') timed.push({ what: `ipset ${args.join(' ')}`, ms: msSince(t), stdout: r.stdout });
  return r;
};
const shTimed = (args: string[], input?: string): { ms: number; stdout: string } => {
  const t = process.hrtime.bigint();
  const r = spawnSync('ipset', args, { input, encoding: 'utf8', maxBuffer: 1 << 30 });
  const ms = msSince(t);
  if (r.status !== 0) throw new Error(`ipset ${args.join(' ')} failed: ${r.stderr}`);
  return { ms, stdout: r.stdout };
};

async function main(): Promise<void> {
  if (localProtocols) {
    const r = spawnSync('sh', ['-c', 'cp /etc/protocols /tmp/protocols && mount --bind /tmp/protocols /etc/protocols'], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`binding /etc/protocols: ${r.stderr}`);
  }
  progress(`/etc/protocols: ${localProtocols ? 'on the guest tmpfs' : 'over 9p (the lab as it is)'}`);
  const cluster = makeCluster(n, 10);
  const build = (extra = 0) => buildDesired({
    services: [...cluster.services, ...Array.from({ length: extra }, (_, k) => makeBenchService(n + k, '1'))],
    endpointSlices: [...cluster.slices, ...Array.from({ length: extra }, (_, k) => makeBenchSlice(n + k, '1', [0], 1))],
    node: cluster.node, nodeName: NODE_NAME,
  }, config, registry);
  const d = build();
  const members = desiredSets(d).reduce((a, w) => a + w.members.length, 0);
  progress(`${n} Services: ${members} set members`);
  await new IptablesRestore().cleanup();

  let t = process.hrtime.bigint();
  const first = new IptablesRestore({ run });
  await first.sync(d, config);
  const firstMs = msSince(t);
  const firstIpsetMs = timed.filter((x) => x.what === 'ipset restore -exist').reduce((a, x) => a + x.ms, 0);
  progress(`(a0) first sync on a clean kernel: ${s(firstMs)}, of it ipset restore ${s(firstIpsetMs)}`);

  const whole = renderIpsets(d, { existing: await listSetNames(spawnRunner) });
  const oldRefill = shTimed(['restore', '-exist'], whole).ms;
  progress(`(a) the old whole refill (-tmp + swap of every set, ${whole.split('\n').length - 1} lines) over the full sets: ${s(oldRefill)}`);

  timed.length = 0;
  t = process.hrtime.bigint();
  const restarted = new IptablesRestore({ run });
  await restarted.sync(d, config);
  const restartMs = msSince(t);
  const restartIpset = [...timed];
  const names = [...await listSetNames(spawnRunner)].filter((x) => desiredSets(d).some((w) => w.name === x));
  const read = restartIpset.find((x) => x.what === 'ipset restore')!;
  const text = read.stdout;
  const readMs = read.ms;
  t = process.hrtime.bigint();
  const saved = parseIpsetSave(text);
  const parseMs = msSince(t);
  t = process.hrtime.bigint();
  const wanted = desiredSets(d);
  const renderMs = msSince(t);
  t = process.hrtime.bigint();
  const plan = planIpsets(wanted, saved, new Set(names));
  const planMs = msSince(t);
  progress(`(b) restart, nothing to change: sync ${s(restartMs)} (ipset calls: ${restartIpset.map((x) => `${x.what} ${s(x.ms)}`).join(', ')}); ` +
    `apart: read ${s(readMs)} (${text.length} bytes), parse ${parseMs.toFixed(0)} ms, members rendered ${renderMs.toFixed(0)} ms, ` +
    `plan ${planMs.toFixed(0)} ms, payload ${plan.payload.length} bytes`);

  const plusOne = build(1);
  timed.length = 0;
  t = process.hrtime.bigint();
  await restarted.sync(plusOne, config);
  const addMs = msSince(t);
  const added = restarted.last!.ipset;
  progress(`(c) one Service added: sync ${s(addMs)} (ipset calls: ${timed.map((x) => `${x.what} ${s(x.ms)}`).join(', ')}); payload:\n${added}`);

  const summary = { services: n, members, localProtocols, firstMs, firstIpsetMs, oldRefillMs: oldRefill, restartMs,
    restartIpset: restartIpset.map(({ what, ms }) => ({ what, ms })), readMs, parseMs, renderMs, planMs, addMs,
    addedLines: added.split('\n').filter(Boolean).length };
  if (!localProtocols) {
    // (d) is about ipset save's own cost: over 9p the protocol lookups would hide it.
    await new IptablesRestore().cleanup();
    process.stdout.write(`${JSON.stringify(summary)}\n`);
    return;
  }
  // (d) the read with a foreign set as big as our biggest (as kube-proxy's beside ours).
  const big = desiredSets(d).reduce((a, w) => (w.members.length > a.members.length ? w : a));
  const copy = (await saveSets(spawnRunner, [big.name])).split(big.name).join('BENCH-FOREIGN');
  const fill = shTimed(['restore', '-exist'], copy).ms;
  const all = shTimed(['save']);
  const oursOnly = shTimed(['restore'], names.map((x) => `save ${x}\n`).join(''));
  progress(`(d) foreign copy of ${big.name} (${big.members.length} members, filled in ${s(fill)}): ipset save of all ${s(all.ms)} ` +
    `(${all.stdout.length} bytes), save lines of ours ${s(oursOnly.ms)} (${oursOnly.stdout.length} bytes)`);
  shTimed(['destroy', 'BENCH-FOREIGN']);
  await new IptablesRestore().cleanup();
  const foreign = { members: big.members.length, fillMs: fill, saveAllMs: all.ms, saveOursMs: oursOnly.ms };
  process.stdout.write(`${JSON.stringify({ ...summary, foreign })}\n`);
}

main().catch((e: unknown) => { process.stderr.write(`${String((e as Error).stack ?? e)}\n`); process.exit(1); });
