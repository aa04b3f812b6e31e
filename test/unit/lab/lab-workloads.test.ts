// The lab control plane's workload controllers and scheduler (lab/cluster/workloads.ts): the pure
// steps, then the chain inside the lab API server (Deployment -> ReplicaSet -> Pods bound to
// nodes -> EndpointSlice), the Scale subresource over HTTP, scale-down deleting gracefully and
// the garbage collector after a Deployment's deletion.
// Addresses: pods 10.10.<node>.0/24, nodes 192.168.10.0/24.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { LabApiServer } from '../../../lab/cluster/apiserver.js';
import {
  type DeploymentLike, type NodeLike, type PodLike, type ReplicaSetLike, POD_TEMPLATE_HASH, fits, nameSuffix, orphansOf, planDeployment,
  planReplicaSet, podTemplateHash, scaleOf, schedulePods, selectorMatches, selectorString,
} from '../../../lab/cluster/workloads.js';
import { type WorkloadPod, decidePod, podRunOf, runningStatus } from '../../../lab/cluster/workload-kubelet.js';

const NOW = '2026-11-26T09:00:00Z';
const template = { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'web', image: 'lab/pod', ports: [{ containerPort: 80 }] }] } };

function deployment(mut: (d: DeploymentLike) => void = () => undefined): DeploymentLike {
  const d: DeploymentLike = { metadata: { name: 'web', namespace: 'default', uid: 'd-1', generation: 1 }, spec: { replicas: 2, selector: { matchLabels: { app: 'web' } }, template } };
  mut(d);
  return d;
}

function replicaSet(name: string, replicas: number, mut: (rs: ReplicaSetLike) => void = () => undefined): ReplicaSetLike {
  const rs: ReplicaSetLike = {
    metadata: { name, namespace: 'default', uid: `rs-${name}`, generation: 1, labels: { app: 'web', [POD_TEMPLATE_HASH]: name.split('-').at(-1)! },
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: 'd-1', controller: true }] },
    spec: { replicas, selector: { matchLabels: { app: 'web' } }, template },
  };
  mut(rs);
  return rs;
}

function pod(name: string, mut: (p: PodLike) => void = () => undefined, owner = 'rs-web-1'): PodLike {
  const p: PodLike = {
    metadata: { name, namespace: 'default', uid: `p-${name}`, labels: { app: 'web' }, creationTimestamp: NOW,
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: owner.slice(3), uid: owner, controller: true }] },
    spec: { nodeName: 'w1' }, status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
  };
  mut(p);
  return p;
}

function node(name: string, mut: (n: NodeLike) => void = () => undefined): NodeLike {
  const n: NodeLike = { metadata: { name, labels: { 'kubernetes.io/hostname': name } }, status: { conditions: [{ type: 'Ready', status: 'True' }] } };
  mut(n);
  return n;
}

describe('workload controllers, pure', () => {
  it('selectors: matchLabels and each matchExpressions operator; empty selects nothing; the string form', () => {
    const sel = { matchLabels: { app: 'web' }, matchExpressions: [{ key: 'tier', operator: 'In', values: ['b', 'a'] }, { key: 'canary', operator: 'DoesNotExist' }] };
    expect(selectorMatches(sel, { app: 'web', tier: 'a' })).toBe(true);
    expect(selectorMatches(sel, { app: 'web', tier: 'c' })).toBe(false);
    expect(selectorMatches(sel, { app: 'web', tier: 'a', canary: '' })).toBe(false);
    expect(selectorMatches({ matchExpressions: [{ key: 'x', operator: 'NotIn', values: ['1'] }] }, {})).toBe(true);
    expect(selectorMatches({ matchExpressions: [{ key: 'x', operator: 'Exists' }] }, { x: '' })).toBe(true);
    expect(selectorMatches({}, { app: 'web' })).toBe(false);
    expect(selectorMatches(undefined, { app: 'web' })).toBe(false);
    expect(selectorString(sel)).toBe('app=web,tier in (a,b),!canary');
  });

  it('pod-template-hash: one value per template whatever the key order, another for another template, in the safe alphabet', () => {
    const h = podTemplateHash(template);
    expect(h).toMatch(/^[bcdfghjklmnpqrstvwxz2456789]{1,10}$/);
    expect(podTemplateHash({ spec: template.spec, metadata: template.metadata })).toBe(h);
    expect(podTemplateHash({ ...template, metadata: { labels: { app: 'web2' } } })).not.toBe(h);
    expect(nameSuffix(() => 0)).toBe('bbbbb');
    expect(nameSuffix(() => 0.999)).toBe('99999');
  });

  it('a new Deployment: one ReplicaSet named by the hash, the hash in its selector, labels and template, owned by the Deployment', () => {
    const plan = planDeployment(deployment(), [], NOW);
    const hash = podTemplateHash(template);
    expect(plan.create).toEqual({
      metadata: { name: `web-${hash}`, namespace: 'default', labels: { app: 'web', [POD_TEMPLATE_HASH]: hash },
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: 'd-1', controller: true, blockOwnerDeletion: true }] },
      spec: { replicas: 2, selector: { matchLabels: { app: 'web', [POD_TEMPLATE_HASH]: hash } },
        template: { metadata: { labels: { app: 'web', [POD_TEMPLATE_HASH]: hash } }, spec: template.spec } },
    });
    expect(plan.resize).toEqual([]);
    expect(plan.status).toMatchObject({ observedGeneration: 1, replicas: 0, availableReplicas: 0, unavailableReplicas: 2, conditions: [{ type: 'Available', status: 'False' }] });
  });

  it('scaled: the current ReplicaSet is resized; status sums the ReplicaSets; Available once enough are', () => {
    const hash = podTemplateHash(template);
    const rs = replicaSet(`web-${hash}`, 2, (r) => { r.status = { replicas: 2, readyReplicas: 2, availableReplicas: 2 }; });
    const plan = planDeployment(deployment((d) => { d.spec!.replicas = 3; }), [rs], NOW);
    expect(plan.create).toBeUndefined();
    expect(plan.resize).toEqual([{ rs, replicas: 3 }]);
    const steady = planDeployment(deployment(), [rs], NOW);
    expect(steady).toEqual({ resize: [], status: expect.objectContaining({ replicas: 2, updatedReplicas: 2, readyReplicas: 2, availableReplicas: 2, conditions: [expect.objectContaining({ type: 'Available', status: 'True' })] }) });
  });

  it('a new template: a new ReplicaSet at full size; the old one scaled to 0 only once the new one is all available; others\' ReplicaSets untouched', () => {
    const old = replicaSet('web-old', 2, (r) => { r.status = { replicas: 2, availableReplicas: 2 }; });
    const foreign = replicaSet('other-x', 1, (r) => { r.metadata.ownerReferences![0]!.uid = 'd-2'; });
    const first = planDeployment(deployment(), [old, foreign], NOW);
    expect(first.create?.spec?.replicas).toBe(2);
    expect(first.resize).toEqual([]);
    const hash = podTemplateHash(template);
    const rolling = replicaSet(`web-${hash}`, 2, (r) => { r.status = { replicas: 2, availableReplicas: 1 }; });
    expect(planDeployment(deployment(), [old, rolling, foreign], NOW).resize).toEqual([]);
    rolling.status!.availableReplicas = 2;
    expect(planDeployment(deployment(), [old, rolling, foreign], NOW).resize).toEqual([{ rs: old, replicas: 0 }]);
  });

  it('a ReplicaSet short of pods creates them: generated names, its labels, owned, Pending, no node; a taken name is drawn again', () => {
    const rs = replicaSet('web-1', 3, (r) => { r.metadata.uid = 'rs-web-1'; });
    const draws = ['aaaaa', 'aaaaa', 'bbbbb', 'ccccc'];
    const plan = planReplicaSet(rs, [pod('web-1-zzzzz')], () => draws.shift()!, (n) => n === 'web-1-aaaaa');
    expect(plan.create.map((p) => p.metadata.name)).toEqual(['web-1-bbbbb', 'web-1-ccccc']);
    expect(plan.create[0]).toEqual({
      metadata: { name: 'web-1-bbbbb', namespace: 'default', labels: { app: 'web' },
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-1', uid: 'rs-web-1', controller: true, blockOwnerDeletion: true }] },
      spec: template.spec, status: { phase: 'Pending' },
    });
    expect(plan.remove).toEqual([]);
    expect(plan.status).toEqual({ replicas: 1, fullyLabeledReplicas: 1, readyReplicas: 1, availableReplicas: 1, observedGeneration: 1 });
  });

  it('a ReplicaSet with too many pods deletes the lowest ranked: unscheduled, Pending, not ready, then newest; terminating and others\' pods do not count', () => {
    const rs = replicaSet('web-1', 1, (r) => { r.metadata.uid = 'rs-web-1'; });
    const pods = [
      pod('old-ready', (p) => { p.metadata.creationTimestamp = '2026-11-26T08:00:00Z'; }),
      pod('new-ready', (p) => { p.metadata.creationTimestamp = '2026-11-26T08:30:00Z'; }),
      pod('not-ready', (p) => { p.status!.conditions = [{ type: 'Ready', status: 'False' }]; }),
      pod('pending', (p) => { p.status = { phase: 'Pending' }; }),
      pod('unscheduled', (p) => { delete p.spec!.nodeName; p.status = { phase: 'Pending' }; }),
      pod('terminating', (p) => { p.metadata.deletionTimestamp = NOW; }),
      pod('foreign', () => undefined, 'rs-other'),
    ];
    const order = (n: number) => planReplicaSet({ ...rs, spec: { ...rs.spec, replicas: n } }, pods, () => 'x', () => false).remove.map((p) => p.metadata.name);
    expect(order(1)).toEqual(['unscheduled', 'pending', 'not-ready', 'new-ready']);
    expect(order(4)).toEqual(['unscheduled']);
    expect(planReplicaSet(rs, pods, () => 'x', () => false).status).toMatchObject({ replicas: 5, readyReplicas: 2 });
  });

  it('the garbage collector: dependents whose controller of that kind is gone, not terminating ones', () => {
    const pods = [pod('a'), pod('b', () => undefined, 'rs-gone'), pod('c', (p) => { p.metadata.deletionTimestamp = NOW; }, 'rs-gone'), pod('d', (p) => { delete p.metadata.ownerReferences; })];
    expect(orphansOf('ReplicaSet', [replicaSet('web-1', 1, (r) => { r.metadata.uid = 'rs-web-1'; })], pods).map((p) => p.metadata.name)).toEqual(['b']);
  });

  it('the scheduler: Ready schedulable untainted nodes (or tolerated), nodeSelector, fewest pods of the same owner first, then fewest at all', () => {
    const nodes = [
      node('cp', (n) => { n.spec = { taints: [{ key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' }] }; }),
      node('w1'), node('w2'), node('w3'),
      node('down', (n) => { n.status = { conditions: [{ type: 'Ready', status: 'False' }] }; }),
      node('cordoned', (n) => { n.spec = { unschedulable: true }; }),
    ];
    const unbound = (name: string, owner = 'rs-web-1') => pod(name, (p) => { delete p.spec!.nodeName; p.status = { phase: 'Pending' }; }, owner);
    // w1 has two pods of another owner; w2 one of ours; w3 nothing.
    const existing = [pod('x1', (p) => { p.spec!.nodeName = 'w1'; }, 'rs-x'), pod('x2', (p) => { p.spec!.nodeName = 'w1'; }, 'rs-x'), pod('o1', (p) => { p.spec!.nodeName = 'w2'; })];
    const binds = schedulePods([...existing, unbound('p1'), unbound('p2'), unbound('p3')], nodes);
    // p1: w3 (none at all); p2: w1 (none of ours, where w2 and now w3 have one); p3: w2 before w3 (1 of ours, 1 in all: by name), w1 has 3.
    expect(binds.map((b) => `${b.pod.metadata.name}->${b.node}`)).toEqual(['p1->w3', 'p2->w1', 'p3->w2']);
    // A terminating pod is not scheduled, a pod no node fits stays unscheduled.
    expect(schedulePods([unbound('gone', 'rs-q'), { ...unbound('t'), metadata: { ...unbound('t').metadata, deletionTimestamp: NOW } }], [nodes[0]!, nodes[4]!])).toEqual([]);
    const tolerant = unbound('tol', 'rs-q');
    tolerant.spec!.tolerations = [{ key: 'node-role.kubernetes.io/control-plane', operator: 'Exists', effect: 'NoSchedule' }];
    expect(fits(tolerant, nodes[0]!)).toBe(true);
    expect(fits({ ...tolerant, spec: { ...tolerant.spec, nodeSelector: { 'kubernetes.io/hostname': 'w2' } } }, nodes[1]!)).toBe(false);
    expect(fits({ ...tolerant, spec: { ...tolerant.spec, tolerations: [{ operator: 'Exists' }] } }, nodes[0]!)).toBe(true);
  });

  it('Scale: replicas from spec (default 1), status replicas and the selector string', () => {
    expect(scaleOf({ metadata: { name: 'web', namespace: 'default', uid: 'u', resourceVersion: '7' }, spec: { selector: { matchLabels: { app: 'web' } } }, status: { replicas: 2 } }))
      .toEqual({ kind: 'Scale', apiVersion: 'autoscaling/v1', metadata: { name: 'web', namespace: 'default', uid: 'u', resourceVersion: '7' },
        spec: { replicas: 1 }, status: { replicas: 2, selector: 'app=web' } });
  });
});

describe('workload controllers in the lab API server', () => {
  let api: LabApiServer;
  let n = 0;
  beforeAll(async () => {
    api = await LabApiServer.start({ lab: { defaultGraceSeconds: 30, random: () => ((n++ * 7) % 27) / 27 } });
    for (const name of ['cp', 'w1', 'w2']) {
      api.put('nodes', { metadata: { name }, spec: name === 'cp' ? { taints: [{ key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' }] } : {},
        status: { conditions: [{ type: 'Ready', status: 'True' }] } });
    }
  });
  afterAll(() => api.close());

  const call = async (method: string, path: string, body?: unknown, contentType = 'application/json') => {
    const r = await fetch(`${api.url}${path}`, { method, headers: { 'content-type': contentType }, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
    return { code: r.status, json: (await r.json()) as Record<string, unknown> };
  };
  const pods = () => api.list('pods').filter((p) => p.metadata.labels?.app === 'web').sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  const active = () => pods().filter((p) => !p.metadata.deletionTimestamp);
  /** What a kubelet does for a bound pod: Running, an address, Ready. */
  let ip = 2;
  const run = () => {
    for (const p of active()) {
      if ((p.status as { phase?: string }).phase === 'Running') continue;
      const addr = `10.10.9.${ip++}`;
      api.put('pods', { ...p, status: { phase: 'Running', podIP: addr, podIPs: [{ ip: addr }], conditions: [{ type: 'Ready', status: 'True' }] } });
    }
  };

  it('a Deployment: its ReplicaSet, its pods spread over the workers, then status and the EndpointSlice follow the pods', async () => {
    const created = await call('POST', '/apis/apps/v1/namespaces/default/deployments', { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'web' },
      spec: { replicas: 2, selector: { matchLabels: { app: 'web' } }, template } });
    expect(created.code).toBe(201);
    expect((created.json.metadata as { generation?: number }).generation).toBe(1);
    api.put('services', { metadata: { name: 'web', namespace: 'default' }, spec: { selector: { app: 'web' }, ports: [{ port: 80, protocol: 'TCP' }] } });
    const rs = api.list('replicasets');
    expect(rs.map((r) => r.metadata.name)).toEqual([`web-${podTemplateHash(template)}`]);
    for (const p of pods()) expect(p.metadata.name).toMatch(new RegExp(`^${rs[0]!.metadata.name}-[bcdfghjklmnpqrstvwxz2456789]{5}$`));
    expect(new Set(pods().map((p) => (p.spec as { nodeName?: string }).nodeName))).toEqual(new Set(['w1', 'w2']));
    run();
    expect(api.get('deployments', 'web', 'default')!.status).toMatchObject({ replicas: 2, readyReplicas: 2, availableReplicas: 2, updatedReplicas: 2 });
    expect(api.get('replicasets', rs[0]!.metadata.name, 'default')!.status).toEqual({ replicas: 2, fullyLabeledReplicas: 2, readyReplicas: 2, availableReplicas: 2, observedGeneration: 1 });
    const slice = api.list('endpointslices').find((s) => s.metadata.labels?.['kubernetes.io/service-name'] === 'web')!;
    expect((slice.endpoints as Array<{ addresses: string[] }>).map((e) => e.addresses[0]).sort()).toEqual(['10.10.9.2', '10.10.9.3']);
  });

  it('the Scale subresource as kubectl scale uses it: GET, merge PATCH, PUT; a bad count 422, a stale resourceVersion 409', async () => {
    const path = '/apis/apps/v1/namespaces/default/deployments/web/scale';
    expect((await call('GET', path)).json).toMatchObject({ kind: 'Scale', apiVersion: 'autoscaling/v1', spec: { replicas: 2 }, status: { replicas: 2, selector: 'app=web' } });
    const up = await call('PATCH', path, { spec: { replicas: 3 } }, 'application/merge-patch+json');
    expect(up).toMatchObject({ code: 200, json: { spec: { replicas: 3 } } });
    expect(api.get('deployments', 'web', 'default')!.metadata.generation).toBe(2);
    expect(active().length).toBe(3);
    run();
    expect(api.get('deployments', 'web', 'default')!.status).toMatchObject({ observedGeneration: 2, replicas: 3, availableReplicas: 3 });
    expect((await call('PATCH', path, { spec: { replicas: -1 } }, 'application/merge-patch+json')).code).toBe(422);
    expect((await call('PUT', path, { metadata: { name: 'web', resourceVersion: '1' }, spec: { replicas: 2 } })).code).toBe(409);
    expect((await call('GET', '/apis/apps/v1/namespaces/default/deployments/nope/scale')).code).toBe(404);
  });

  it('scaled to 1: two pods terminating (deletionTimestamp, their endpoints terminating), the status counting only the active one; gone at a grace-0 delete', async () => {
    const cur = (await call('GET', '/apis/apps/v1/namespaces/default/deployments/web/scale')).json as { metadata: { resourceVersion: string } };
    expect((await call('PUT', '/apis/apps/v1/namespaces/default/deployments/web/scale', { metadata: { name: 'web', resourceVersion: cur.metadata.resourceVersion }, spec: { replicas: 1 } })).code).toBe(200);
    const terminating = pods().filter((p) => p.metadata.deletionTimestamp);
    expect({ terminating: terminating.length, active: active().length }).toEqual({ terminating: 2, active: 1 });
    expect(api.get('deployments', 'web', 'default')!.status).toMatchObject({ replicas: 1, availableReplicas: 1 });
    const slice = api.list('endpointslices').find((s) => s.metadata.labels?.['kubernetes.io/service-name'] === 'web')!;
    expect((slice.endpoints as Array<{ conditions: { terminating: boolean } }>).filter((e) => e.conditions.terminating).length).toBe(2);
    // The kubelet's last word once the containers stopped.
    for (const p of terminating) expect((await call('DELETE', `/api/v1/namespaces/default/pods/${p.metadata.name}?gracePeriodSeconds=0`)).code).toBe(200);
    expect(pods().length).toBe(1);
  });

  it('a pod deleted by hand is replaced; the Deployment deleted: its ReplicaSet at once, its pods terminating', async () => {
    const [only] = active();
    await call('DELETE', `/api/v1/namespaces/default/pods/${only!.metadata.name}?gracePeriodSeconds=0`);
    expect(active().map((p) => p.metadata.name)).toEqual([expect.not.stringMatching(only!.metadata.name)]);
    expect((await call('DELETE', '/apis/apps/v1/namespaces/default/deployments/web')).code).toBe(200);
    expect(api.list('replicasets')).toEqual([]);
    expect(active()).toEqual([]);
    expect(pods().length).toBe(1);
  });
});

describe('the workload kubelet\'s decisions, pure', () => {
  const host = { nodes: () => ['w1', 'w2'], isHarnessPod: (name: string) => name === 'webpod-1' };
  const wp = (mut: (p: WorkloadPod) => void = () => undefined): WorkloadPod => {
    const p: WorkloadPod = { metadata: { name: 'web-1-bbbbb', namespace: 'default', uid: 'u1' }, spec: { nodeName: 'w1', containers: [{ name: 'web', image: 'lab/pod' }] }, status: { phase: 'Pending' } };
    mut(p);
    return p;
  };

  it('starts a bound pod of its nodes once; leaves unbound, other nodes\', hostNetwork, harness and finished pods alone', () => {
    expect(decidePod(wp(), false, undefined, host)).toBe('start');
    expect(decidePod(wp(), false, 'u1', host)).toBe('none');
    expect(decidePod(wp((p) => { delete p.spec!.nodeName; }), false, undefined, host)).toBe('none');
    expect(decidePod(wp((p) => { p.spec!.nodeName = 'elsewhere'; }), false, undefined, host)).toBe('none');
    expect(decidePod(wp((p) => { p.spec!.hostNetwork = true; }), false, undefined, host)).toBe('none');
    expect(decidePod(wp((p) => { p.metadata.name = 'webpod-1'; }), false, undefined, host)).toBe('none');
    expect(decidePod(wp((p) => { p.status!.phase = 'Succeeded'; }), false, undefined, host)).toBe('none');
  });

  it('stops its running pod when terminating or gone; finishes (grace-0 delete) a terminating one it never ran; another UID is not its pod', () => {
    expect(decidePod(wp((p) => { p.metadata.deletionTimestamp = NOW; }), false, 'u1', host)).toBe('stop');
    expect(decidePod(wp(), true, 'u1', host)).toBe('stop');
    expect(decidePod(wp((p) => { p.metadata.deletionTimestamp = NOW; }), false, undefined, host)).toBe('finish');
    expect(decidePod(wp(), true, undefined, host)).toBe('none');
    expect(decidePod(wp((p) => { p.metadata.deletionTimestamp = NOW; p.spec!.nodeName = 'elsewhere'; }), false, undefined, host)).toBe('none');
    expect(decidePod(wp(), true, 'u0', host)).toBe('none');
  });

  it('the server\'s ports from the containers (TCP 80 when none), the grace period; the Running status', () => {
    expect(podRunOf(wp())).toEqual({ tcp: [80], udp: [], graceSeconds: 30 });
    expect(podRunOf(wp((p) => {
      p.spec!.terminationGracePeriodSeconds = 5;
      p.spec!.containers = [{ ports: [{ containerPort: 8080 }, { containerPort: 53, protocol: 'UDP' }, { containerPort: 70000 }] }, { ports: [{ containerPort: 80, protocol: 'TCP' }, { containerPort: 8080 }] }];
    }))).toEqual({ tcp: [80, 8080], udp: [53], graceSeconds: 5 });
    expect(podRunOf(wp((p) => { p.spec!.containers = [{ ports: [{ containerPort: 53, protocol: 'UDP' }] }]; }))).toEqual({ tcp: [], udp: [53], graceSeconds: 30 });
    const s = runningStatus(wp(), { ipv4: '10.10.1.2', ipv6: 'fd00:10:10:1::2', hostIP: '172.18.0.3', pid: 42 }, NOW);
    expect(s).toMatchObject({ phase: 'Running', podIP: '10.10.1.2', podIPs: [{ ip: '10.10.1.2' }, { ip: 'fd00:10:10:1::2' }], hostIP: '172.18.0.3',
      containerStatuses: [{ name: 'web', ready: true, restartCount: 0, containerID: 'lab://42', state: { running: { startedAt: NOW } } }] });
    expect((s.conditions as Array<{ type: string; status: string }>).map((c) => `${c.type}=${c.status}`)).toEqual(['PodScheduled=True', 'Initialized=True', 'ContainersReady=True', 'Ready=True']);
  });
});
