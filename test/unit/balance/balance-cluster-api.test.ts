// The cluster load view over a real HTTP API (the lab API server, list/watch, resourceVersions,
// 409s): three nodes' ClusterViews elect one leader on a Lease, report their IPVS counters, and the
// leader's weights reach every node's tracker; then the leader dies (crash and graceful), the view
// goes stale, a node lies, and a weights object is forged. Each node's "kernel" is a stub whose
// per-destination counters grow as clients would drive them (test/support/cluster-view.ts).
import { afterEach, describe, expect, it } from '@jest/globals';
import { ClusterWeights } from '../../../src/balance/cluster-view.js';
import type { RejectReason } from '../../../src/balance/estimate.js';
import { ClusterView } from '../../../src/kube/cluster-view.js';
import { LEASE_NAME, VIEW_AT_ANNOTATION } from '../../../src/kube/cluster-view-options.js';
import { pickReporters } from '../../../src/balance/reporting.js';
import { BACKENDS, KEY, VIEW, kernelStub, table } from '../../support/cluster-view.js';
import { scratchDir } from '../../support/scratch.js';
import { Metrics } from '../../../src/metrics/metrics.js';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../../../src/cli/main.js', import.meta.url));
import { FakeApiServer, clientFor } from '../../support/fake-apiserver.js';
import { waitFor } from '../../support/wait.js';

const PERIOD_MS = 250;
interface Node { name: string; view: ClusterView; weights: ClusterWeights; rejections: RejectReason[]; pokes: number; stepped: Array<ReadonlyMap<string, number>>; metrics: Metrics }
let server: FakeApiServer;
let nodes: Node[] = [];

async function startNode(name: string, o: { leaseDurationMs?: number; elect?: boolean; activeOf?: (address: string, read: number) => number; reporters?: number } = {}): Promise<Node> {
  const weights = new ClusterWeights(3 * PERIOD_MS, undefined, undefined, name);
  weights.apply(table, new Set([KEY]), Date.now()); // the sync loop's first apply: the Service is opted in
  const node: Node = { name, weights, rejections: [], pokes: 0, stepped: [], metrics: new Metrics(), view: undefined as unknown as ClusterView };
  node.view = new ClusterView({
    client: clientFor(server), nodeName: name, namespace: 'ipvs-operator', ipvs: kernelStub(Date.now(), o.activeOf), weights,
    backends: () => new Map([[VIEW, BACKENDS.map((a) => `${a}:8080`)]]),
    poke: () => { node.pokes++; }, log: () => undefined,
    periodMs: PERIOD_MS, leaseDurationMs: o.leaseDurationMs ?? 1500, renewDeadlineMs: 1000, retryPeriodMs: 100,
    healing: { backoff: { initialMs: 50, maxMs: 200, jitter: 0 }, relistMs: 0, idleMs: 0, watchTimeoutSeconds: 30, maxRetryAfterMs: 1000 },
    onRejection: (r) => node.rejections.push(r),
    ...(o.reporters === undefined ? {} : { reporters: o.reporters }),
    onEstimate: (vk, e, w, imbalance) => { node.stepped.push(new Map(w)); node.metrics.setBalanceView(vk, e, w, imbalance); },
    ...(o.elect === false ? { elect: false } : {}),
  });
  node.view.start();
  nodes.push(node);
  return node;
}

const leaders = () => nodes.filter((n) => n.view.leading);
const lease = () => server.get('leases', LEASE_NAME, 'ipvs-operator');
const published = () => server.get('ipvsserviceweights', 'web', 'shop');
const weightOf = (o: ReturnType<typeof published>, backend: string) =>
  ((o?.spec as { ports?: Array<{ weights: Record<string, number> }> } | undefined)?.ports?.[0]?.weights ?? {})[backend];

afterEach(async () => {
  await Promise.all(nodes.map((n) => n.view.stop(false)));
  nodes = [];
  await server?.close();
});

describe('the cluster load view against an API server', () => {
  it('costs no Lease traffic until a Service opts in, and gives the Lease up when none does any more', async () => {
    server = await FakeApiServer.start();
    const weights = new ClusterWeights(3 * PERIOD_MS);
    const view = new ClusterView({
      client: clientFor(server), nodeName: 'node-a', namespace: 'ipvs-operator', ipvs: kernelStub(), weights,
      backends: () => new Map([[VIEW, BACKENDS.map((a) => `${a}:8080`)]]), poke: () => undefined, log: () => undefined,
      periodMs: PERIOD_MS, leaseDurationMs: 1500, renewDeadlineMs: 1000, retryPeriodMs: 100,
    });
    nodes.push({ name: 'node-a', view, weights, rejections: [], pokes: 0, stepped: [], metrics: new Metrics() });
    view.start();
    const leaseRequests = () => server.requests.filter((r) => r.path.includes('/leases')).length;
    await waitFor(() => server.requests.some((r) => r.path.includes('/ipvsserviceweights') && r.query.includes('watch=true')), 'the weights watched', 10_000);
    expect(leaseRequests()).toBe(0);
    weights.apply(table, new Set([KEY]), Date.now()); // a sync opts the Service in
    await waitFor(() => view.leading, 'node-a leads', 10_000);
    weights.apply(new Map(), new Set([KEY]), Date.now()); // the Service opts out
    await waitFor(() => !view.leading && (lease()!.spec as { holderIdentity: string }).holderIdentity === '', 'the Lease given up', 10_000);
  }, 60_000);

  it('stop() ends a round waiting on an API server that never answers, instead of waiting for it', async () => {
    server = await FakeApiServer.start();
    server.fail({ resource: 'leases', status: 0 }); // the request hangs until the server closes
    const n = await startNode('node-a');
    await waitFor(() => server.requests.some((r) => r.path.includes('/leases')), 'a Lease request in flight', 10_000);
    nodes = nodes.filter((x) => x !== n);
    const outcome = await Promise.race([n.view.stop().then(() => 'stopped'), new Promise((r) => setTimeout(() => r('still waiting after 5 s'), 5000))]);
    expect(outcome).toBe('stopped');
  }, 30_000);

  it('elects one leader, which turns the nodes\' reports into weights that every node applies', async () => {
    server = await FakeApiServer.start();
    for (const n of ['node-a', 'node-b', 'node-c']) await startNode(n);
    await waitFor(() => leaders().length === 1, 'one leader', 20_000);
    await waitFor(() => server.list('ipvsloadreports').length === 3, 'three reports', 20_000);
    // The slow backend's weight comes down in steps of at most 5 per period to about 20 × 0.05 / 0.5.
    await waitFor(() => (weightOf(published(), '10.10.1.3:8080') ?? 20) <= 3, 'the slow backend weighted down', 30_000);
    const o = published()!;
    expect(weightOf(o, '10.10.1.1:8080')).toBe(20);
    expect(weightOf(o, '10.10.1.2:8080')).toBe(20);
    expect((o.spec as { leader: string }).leader).toBe(leaders()[0]!.name);
    expect(leaders().map((n) => n.name)).toEqual([(lease()!.spec as { holderIdentity: string }).holderIdentity]);
    // The two fast backends tie at 20: the three nodes are dealt them as first choices, 2 and 1.
    const choicesOf = () => (published()?.spec as { ports?: Array<{ firstChoices?: Record<string, string> }> } | undefined)?.ports?.[0]?.firstChoices ?? {};
    await waitFor(() => Object.keys(choicesOf()).length === 3, 'a first choice for each of the three nodes', 20_000);
    const dealt = Object.values(choicesOf()).sort();
    expect(Object.keys(choicesOf()).sort()).toEqual(['node-a', 'node-b', 'node-c']);
    expect(new Set(dealt)).toEqual(new Set(['10.10.1.1:8080', '10.10.1.2:8080']));
    // Every node applies what was published: base weight 1 × the cluster weight, its own first
    // choice one higher.
    for (const n of nodes) {
      await waitFor(() => n.weights.isAlive && n.weights.weightsOf(VIEW)?.get('10.10.1.3:8080') === weightOf(published(), '10.10.1.3:8080')
        && n.weights.publishedChoicesOf(VIEW)?.get(n.name) === choicesOf()[n.name], `${n.name} has the weights`, 10_000);
      const applied = n.weights.apply(table, new Set(), Date.now());
      const mine = choicesOf()[n.name];
      expect(applied.table.get(KEY)!.dests.map((d) => d.weight))
        .toEqual([mine === '10.10.1.1:8080' ? 21 : 20, mine === '10.10.1.2:8080' ? 21 : 20, weightOf(published(), '10.10.1.3:8080')]);
      expect(applied.problems).toEqual([]);
      expect(n.pokes).toBeGreaterThan(0);
    }
    // The leader's metrics: weights, estimates and the imbalance index per Service port.
    const text = await leaders()[0]!.metrics.render(Date.now(), 0);
    expect(text).toMatch(/ipvsop_balance_weight\{namespace="shop",service="web",port="http",backend="10\.10\.1\.1:8080"\} 20/);
    expect(text).toMatch(/ipvsop_balance_estimate_seconds\{namespace="shop",service="web",port="http",backend="10\.10\.1\.3:8080"\} 0\.[45]/);
    expect(text).toMatch(/ipvsop_balance_imbalance\{namespace="shop",service="web",port="http"\} \d/);
    // `status --service`, the CLI process over the same API: each backend's weight and share.
    const kubeconfig = join(scratchDir('view-'), 'kubeconfig');
    writeFileSync(kubeconfig, `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "${server.url}"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n`);
    // Not spawnSync: the API server answers from this process's event loop.
    const out = await promisify(execFile)(process.execPath, [CLI, 'status', '--service', 'shop/web', '--kubeconfig', kubeconfig], { encoding: 'utf8', timeout: 30_000 });
    expect(out.stderr).toBe('');
    const rows = out.stdout.split('\n').filter((l) => l.startsWith('http '));
    expect(rows.map((l) => l.split(/\s+/).slice(1, 3))).toEqual([['10.10.1.1:8080', '20'], ['10.10.1.2:8080', '20'], ['10.10.1.3:8080', String(weightOf(published(), '10.10.1.3:8080'))]]);
    expect(rows.every((l) => / 3 +\d+$/.test(l))).toBe(true); // three nodes report each backend
    // The last column: how many nodes each backend is the first choice of, the three dealt.
    expect(rows.map((l) => Number(l.split(/\s+/).at(-1))).reduce((a, b) => a + b)).toBe(3);
    expect(out.stdout).toContain(`(weights from ${leaders()[0]!.name})`);
  }, 90_000);

  it('at low load, a fast backend open at one read in seven on each node is still measured: the slow one is weighted down', async () => {
    // One client per node at a time: any single read mostly sees 0 on the fast backends (what the
    // lab experiment showed: at one read per period they were never measured, and nothing moved).
    server = await FakeApiServer.start();
    const activeOf = (a: string, read: number) => (a === '10.10.1.3' ? (read % 10 < 7 ? 1 : 0) : (read % 7 === 0 ? 1 : 0));
    for (const n of ['node-a', 'node-b', 'node-c']) await startNode(n, { activeOf });
    await waitFor(() => (weightOf(published(), '10.10.1.3:8080') ?? 20) <= 5, 'the slow backend weighted down', 30_000);
    expect([weightOf(published(), '10.10.1.1:8080'), weightOf(published(), '10.10.1.2:8080')]).toEqual([20, 20]);
    const report = server.get('ipvsloadreports', 'node-a')!.spec as { services: Array<{ backends: Array<{ backend: string; active: number }> }> };
    expect(report.services[0]!.backends.find((b) => b.backend === '10.10.1.1:8080')!.active).toBeLessThan(1);
  }, 60_000);

  it('equal backends: the first view is published although no weight moved, 20 each', async () => {
    // Every backend holds one connection at 20 new a second on each node: 50 ms each, one speed.
    server = await FakeApiServer.start();
    for (const n of ['node-a', 'node-b']) await startNode(n, { activeOf: () => 1 });
    await waitFor(() => published() !== undefined, 'the weights object', 30_000);
    expect(BACKENDS.map((a) => weightOf(published(), `${a}:8080`))).toEqual([20, 20, 20]);
    const estimates = (published()!.spec as { ports: Array<{ estimates: Record<string, number> }> }).ports[0]!.estimates;
    expect(Object.keys(estimates).length).toBeGreaterThan(0);
  }, 60_000);

  it('followers watch the Lease instead of reading it every retry period', async () => {
    server = await FakeApiServer.start();
    for (const n of ['node-a', 'node-b', 'node-c']) await startNode(n);
    await waitFor(() => leaders().length === 1, 'one leader', 20_000);
    const leasePath = '/apis/coordination.k8s.io/v1/namespaces/ipvs-operator/leases';
    const count = (method: string, watch: boolean) => server.requests.filter((r) => r.method === method && r.path.startsWith(leasePath)
      && r.query.includes('watch=true') === watch).length;
    const [gets0, puts0] = [count('GET', false), count('PUT', false)];
    // The leader renews (a read and a write) every retry period of 100 ms: wait for 20 of them.
    await waitFor(() => count('PUT', false) - puts0 >= 20, '20 renewals', 20_000);
    const [gets, puts] = [count('GET', false) - gets0, count('PUT', false) - puts0];
    // Reading every retry period, the two followers would add two reads a renewal (about 3 × puts).
    expect(gets).toBeLessThanOrEqual(puts + 4);
    expect(count('GET', true)).toBeGreaterThanOrEqual(2); // each follower's watch (and the leader's)
    // And they still see each renewal: the view stays live on every node.
    for (const n of nodes) expect(n.weights.isAlive).toBe(true);
  }, 60_000);

  it('a crashed leader is replaced only after its lease expired; a stopping one hands over at once', async () => {
    server = await FakeApiServer.start();
    for (const n of ['node-a', 'node-b']) await startNode(n, { leaseDurationMs: 2000 });
    await waitFor(() => leaders().length === 1, 'one leader', 20_000);
    await waitFor(() => (weightOf(published(), '10.10.1.3:8080') ?? 20) <= 3, 'the slow backend weighted down', 30_000);
    await waitFor(() => nodes.every((n) => n.weights.publishedOf(VIEW)?.get('10.10.1.3:8080') === weightOf(published(), '10.10.1.3:8080')), 'both nodes have the weights', 10_000);
    const first = leaders()[0]!;
    const lastRenew = Date.parse((lease()!.spec as { renewTime: string }).renewTime);
    await first.view.stop(false); // a crash: the Lease stays as it was
    nodes = nodes.filter((n) => n !== first);
    await waitFor(() => leaders().length === 1, 'a new leader', 20_000);
    const taken = lease()!.spec as { holderIdentity: string; acquireTime: string; leaseTransitions: number };
    expect(taken.holderIdentity).toBe(nodes[0]!.name);
    expect(taken.leaseTransitions).toBe(1);
    // No split brain: the survivor waited out the whole lease after the last renewal it saw.
    expect(Date.parse(taken.acquireTime) - lastRenew).toBeGreaterThanOrEqual(2000 - 150);
    // The new leader starts from the published weights: its first step does not put the slow backend back at the top.
    await waitFor(() => nodes[0]!.stepped.length > 0, 'the new leader\'s first step', 10_000);
    expect(nodes[0]!.stepped[0]!.get('10.10.1.3:8080')).toBeLessThanOrEqual(3);

    // Graceful: with a 60 s lease, only the release lets the other node take over in time.
    await Promise.all(nodes.map((n) => n.view.stop(false)));
    nodes = [];
    server.remove('leases', LEASE_NAME, 'ipvs-operator');
    for (const n of ['node-c', 'node-d']) await startNode(n, { leaseDurationMs: 60_000 });
    await waitFor(() => leaders().length === 1, 'one leader', 20_000);
    const leaving = leaders()[0]!;
    const stoppedAt = Date.now();
    await leaving.view.stop(true);
    nodes = nodes.filter((n) => n !== leaving);
    await waitFor(() => leaders().length === 1, 'the other node leads', 30_000);
    expect(Date.now() - stoppedAt).toBeLessThan(60_000);
  }, 120_000);

  it('with no live leader, nodes go back to local weights with a ClusterViewStale problem, and return when one leads', async () => {
    server = await FakeApiServer.start();
    const leader = await startNode('node-a');
    const follower = await startNode('node-b', { elect: false });
    await waitFor(() => leader.view.leading, 'node-a leads', 20_000);
    await waitFor(() => (weightOf(published(), '10.10.1.3:8080') ?? 20) < 20, 'weights published', 30_000);
    await waitFor(() => follower.weights.isAlive && follower.weights.weightsOf(VIEW) !== undefined, 'the follower applies them', 10_000);
    expect((lease()!.metadata as { annotations?: Record<string, string> }).annotations?.[VIEW_AT_ANNOTATION]).toBeDefined();

    await leader.view.stop(false);
    nodes = nodes.filter((n) => n !== leader);
    await waitFor(() => !follower.weights.isAlive, 'the view goes stale on the follower', 20_000);
    expect(follower.weights.weightsOf(VIEW)).toBeUndefined();
    await waitFor(() => follower.weights.apply(table, new Set(), Date.now()).problems.some((p) => p.reason === 'ClusterViewStale'), 'a ClusterViewStale problem', 20_000);
    const local = follower.weights.apply(table, new Set(), Date.now());
    expect(local.table.get(KEY)!.dests.map((d) => d.weight)).toEqual([1, 1, 1]);
    expect(local.problems).toEqual([expect.objectContaining({ service: 'shop/web', reason: 'ClusterViewStale' })]);

    await startNode('node-c');
    await waitFor(() => follower.weights.isAlive, 'live again once node-c leads', 30_000);
    expect(follower.weights.apply(table, new Set(), Date.now()).problems).toEqual([]);
  }, 120_000);

  it('a lying node\'s report is refused with its reason and changes nothing; a forged weights object is refused', async () => {
    server = await FakeApiServer.start();
    const leader = await startNode('node-a');
    await waitFor(() => leader.view.leading, 'node-a leads', 20_000);
    const lie = (conns: number, active: number, at: number) => server.put('ipvsloadreports', {
      metadata: { name: 'liar' },
      spec: { node: 'liar', at: new Date(at).toISOString(), services: [{ key: VIEW, backends: BACKENDS.map((a) => ({ backend: `${a}:8080`, active, inactive: 0, conns, inBytes: 0, outBytes: 0 })) }] },
    });
    lie(0, 0, Date.now() - 1000);
    await waitFor(() => server.list('ipvsloadreports').length === 2, 'the liar\'s first report stored', 5_000);
    // Then 100 M connections in a second and more active connections than any node holds.
    lie(100_000_000, 50_000_000, Date.now());
    await waitFor(() => leader.rejections.includes('absurd-conns'), 'the absurd report refused', 20_000);
    // The weights follow the honest node alone: the slow backend still goes down, the fast stay at the top.
    await waitFor(() => (weightOf(published(), '10.10.1.3:8080') ?? 20) <= 3, 'weights from the honest node', 30_000);
    expect(weightOf(published(), '10.10.1.1:8080')).toBe(20);
    // Nor is the liar dealt a first choice (it would shift the honest nodes' choices) while it
    // keeps lying with fresh reports: only node-a is.
    const choices = () => Object.keys((published()?.spec as { ports?: Array<{ firstChoices?: Record<string, string> }> } | undefined)?.ports?.[0]?.firstChoices ?? {});
    const keepLying = setInterval(() => lie(100_000_000, 50_000_000, Date.now()), 100);
    try {
      await waitFor(() => choices().join() === 'node-a', 'first choices for node-a alone', 15_000);
      const stepsBefore = leader.stepped.length;
      await waitFor(() => leader.stepped.length >= stepsBefore + 3, 'three more aggregation periods', 10_000);
      expect(choices()).toEqual(['node-a']);
    } finally {
      clearInterval(keepLying);
    }

    server.put('ipvsserviceweights', { metadata: { name: 'web', namespace: 'shop' }, spec: { leader: 'mallory', at: new Date().toISOString(), ports: [{ port: 'http', weights: { '10.10.1.1:8080': 1000 } }] } });
    await waitFor(() => leader.weights.apply(table, new Set(), Date.now()).problems.some((p) => p.reason === 'ClusterWeightsInvalid'), 'the forged object refused', 10_000);
    expect(leader.weights.weightsOf(VIEW)).toBeUndefined();
  }, 120_000);

  it('K reporters: the leader names two of three nodes for the Service; the third stops reporting it, and still applies the weights', async () => {
    server = await FakeApiServer.start();
    const names = ['node-a', 'node-b', 'node-c'];
    for (const n of names) await startNode(n, { reporters: 2 });
    await waitFor(() => leaders().length === 1, 'one leader', 20_000);
    const want = pickReporters('shop/web', names, 2).sort();
    const reportersOf = () => (published()?.spec as { reporters?: string[] } | undefined)?.reporters;
    await waitFor(() => JSON.stringify(reportersOf()) === JSON.stringify(want), `reporters ${want.join(', ')} published`, 30_000);
    const other = names.find((n) => !want.includes(n))!;
    // Its report object stays (written to stay known) but names no Service once it has seen the list.
    const servicesOf = (n: string) => ((server.get('ipvsloadreports', n)?.spec as { services?: unknown[] } | undefined)?.services ?? []).length;
    await waitFor(() => servicesOf(other) === 0, `${other} reports nothing`, 20_000);
    for (const n of want) expect(servicesOf(n)).toBe(1);
    // The weights still come from the two reporters and reach every node, the third included.
    await waitFor(() => (weightOf(published(), '10.10.1.3:8080') ?? 20) <= 3, 'the slow backend weighted down by two reporters', 30_000);
    const third = nodes.find((n) => n.name === other)!;
    await waitFor(() => third.weights.weightsOf(VIEW)?.get('10.10.1.3:8080') === weightOf(published(), '10.10.1.3:8080'), `${other} applies them`, 10_000);
    expect(third.weights.reports(VIEW)).toBe(false);
  }, 120_000);
});
