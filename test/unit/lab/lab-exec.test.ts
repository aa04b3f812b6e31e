// `kubectl exec` against the lab API server (lab/cluster/exec.ts): the REAL kubectl (1.30+ speaks
// WebSocket, v5.channel.k8s.io, and falls back to SPDY only when the upgrade fails) against the
// server in this process, whose runtime here runs the command on this host (the lab cluster's
// runs it in the pod's netns: the cluster scenario "kubectl exec"). And a hand-made WebSocket
// client for what kubectl does not show: the frames of a session, v4, the errors before the upgrade.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LabApiServer, kubeconfigYaml } from '../../../lab/cluster/apiserver.js';
import type { Obj } from '../../../lab/cluster/api-types.js';
import { NETNS_ANNOTATION, podNetns } from '../../../lab/cluster/exec.js';
import { parseTokenFile } from '../../../lab/cluster/rbac.js';
import { makeSelfSignedCert } from '../../../lab/cluster/tls.js';
import { Opcode, WsDecoder, type WsEvent, closePayload, encodeFrame } from '../../../lab/cluster/websocket.js';

const KUBECTL = '/usr/bin/kubectl';
const VIEWER_RBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: { name: pod-reader }
rules: [{ apiGroups: [""], resources: [pods], verbs: [get, list] }]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: viewer }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: pod-reader }
subjects: [{ kind: User, name: viewer }]
`;
let api: LabApiServer;
let dir: string;
let ca: string;

function pod(name: string, f: (p: Record<string, any>) => void = () => undefined): object { // eslint-disable-line @typescript-eslint/no-explicit-any
  const p = { apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'default' }, spec: { nodeName: 'n1', containers: [{ name: 'whoami' }] }, status: { phase: 'Running' } };
  f(p);
  return p;
}

/** kubectl as `who` with `input` on its stdin; its exit code and output (never rejects). */
function kubectl(who: 'admin' | 'viewer', args: string[], input?: string | Buffer): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = execFile(KUBECTL, ['--cache-dir', join(dir, 'cache'), '--request-timeout=30s', ...args], { env: { ...process.env, KUBECONFIG: join(dir, `${who}.kubeconfig`), HOME: dir }, maxBuffer: 16 << 20 },
      (e, out, err) => resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, out, err }));
    child.stdin!.end(input ?? '');
  });
}

/** An upgrade request by hand: the socket after a 101, or the status and Status body of the refusal. */
function upgrade(path: string, o: { token?: string; protocol?: string; upgrade?: string } = {}): Promise<{ socket: Socket; head: Buffer; protocol: string } | { status: number; body: Record<string, unknown> }> {
  const u = new URL(api.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path, ca, headers: {
      connection: 'Upgrade', upgrade: o.upgrade ?? 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': randomBytes(16).toString('base64'),
      'sec-websocket-protocol': o.protocol ?? 'v5.channel.k8s.io', authorization: `Bearer ${o.token ?? 'admin-token'}`,
    } });
    req.on('upgrade', (res, socket, head) => resolve({ socket, head, protocol: String(res.headers['sec-websocket-protocol']) }));
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => { text += d; }).on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A client session: sends `messages` (masked), reads every frame until the server's close; the events read. */
function session(up: { socket: Socket; head: Buffer }, messages: Buffer[]): Promise<WsEvent[]> {
  const { socket } = up;
  const d = new WsDecoder({ requireMask: false, maxMessage: 1 << 24 });
  const events: WsEvent[] = [];
  return new Promise((resolve) => {
    const read = (c: Buffer) => {
      for (const ev of d.push(c)) {
        events.push(ev);
        if (ev.type === 'close') socket.end(encodeFrame(Opcode.close, closePayload(1000), { mask: randomBytes(4) }));
      }
    };
    read(up.head);
    socket.on('data', read);
    socket.on('close', () => resolve(events));
    for (const m of messages) socket.write(encodeFrame(Opcode.binary, m, { mask: randomBytes(4) }));
  });
}

const execPath = (name: string, q: string) => `/api/v1/namespaces/default/pods/${name}/exec?${q}`;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'lab-exec-'));
  // HTTPS, as kubectl sends a bearer token only over TLS.
  const cert = makeSelfSignedCert(dir, { ips: ['127.0.0.1'] }, 1);
  ca = readFileSync(cert.cert, 'utf8');
  api = await LabApiServer.start({
    tls: { cert: ca, key: readFileSync(cert.key, 'utf8') },
    auth: { tokens: parseTokenFile('admin-token,admin,1,"system:masters"\nviewer-token,viewer,2\n'), rbacYaml: [VIEWER_RBAC] },
    // This host's processes stand for the pod's: the protocol is what is under test here.
    exec: { argv: (_pod, _container, command) => [...command] },
  });
  for (const [who, token] of [['admin', 'admin-token'], ['viewer', 'viewer-token']] as const) writeFileSync(join(dir, `${who}.kubeconfig`), kubeconfigYaml(api.url, token, cert.cert));
  api.put('pods', pod('p1'));
  api.put('pods', pod('crashing', (p) => { p.status.containerStatuses = [{ name: 'whoami', state: { waiting: { reason: 'CrashLoopBackOff' } } }]; }));
});

afterAll(async () => {
  await api?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const d = existsSync(KUBECTL) ? describe : describe.skip;

d('kubectl exec against the lab API server', () => {
  it('prints the command\'s stdout and stderr, exits 0; over one WebSocket GET upgrade (no SPDY fallback)', async () => {
    const before = api.requests.length;
    const r = await kubectl('admin', ['exec', 'p1', '--', 'sh', '-c', 'echo out; echo err >&2']);
    expect(r).toEqual({ code: 0, out: 'out\n', err: 'err\n' });
    const execs = api.requests.slice(before).filter((x) => x.path.endsWith('/exec'));
    expect(execs.map((x) => `${x.method} ${x.user} ${x.status ?? 'upgraded'}`)).toEqual(['GET admin upgraded']);
    expect(new URLSearchParams(execs[0]!.query).getAll('command')).toEqual(['sh', '-c', 'echo out; echo err >&2']);
  }, 60_000);

  it('-i forwards stdin to its EOF (v5\'s close signal ends cat): a line, and 1 MiB of bytes in kubectl\'s 32 KiB messages', async () => {
    expect(await kubectl('admin', ['exec', '-i', 'p1', '--', 'cat'], 'data\n')).toEqual({ code: 0, out: 'data\n', err: '' });
    const big = randomBytes(1 << 20).toString('base64'); // 1.4 MB of text
    const r = await kubectl('admin', ['exec', '-i', 'p1', '--', 'sh', '-c', 'wc -c; echo done >&2'], big);
    expect(r).toEqual({ code: 0, out: `${big.length}\n`, err: 'done\n' });
    const echoed = await kubectl('admin', ['exec', '-i', 'p1', '--', 'cat'], big);
    expect({ code: echoed.code, same: echoed.out === big, err: echoed.err }).toEqual({ code: 0, same: true, err: '' });
  }, 60_000);

  it('a failing command: kubectl exits with its code', async () => {
    const r = await kubectl('admin', ['exec', 'p1', '--', 'sh', '-c', 'echo partial; exit 3']);
    expect(r).toEqual({ code: 3, out: 'partial\n', err: 'command terminated with exit code 3\n' });
    expect((await kubectl('admin', ['exec', 'p1', '--', 'sh', '-c', 'kill -9 $$'])).code).toBe(137);
  }, 60_000);

  it('refusals kubectl prints: a missing pod (NotFound), a container that is not running, an unknown container, RBAC without pods/exec, a command that does not exist', async () => {
    expect(await kubectl('admin', ['exec', 'nope', '--', 'true'])).toEqual({ code: 1, out: '', err: 'Error from server (NotFound): pods "nope" not found\n' });
    const crash = await kubectl('admin', ['exec', 'crashing', '--', 'true']);
    expect({ code: crash.code, err: crash.err }).toEqual({ code: 1, err: 'Error from server (BadRequest): container whoami in pod crashing is not running (waiting: CrashLoopBackOff)\n' });
    const unknown = await kubectl('admin', ['exec', 'p1', '-c', 'other', '--', 'true']);
    expect({ code: unknown.code, err: unknown.err }).toEqual({ code: 1, err: 'Error from server (BadRequest): container other is not valid for pod p1\n' });
    // The viewer may get the pod (kubectl reads it first) but not exec into it: the WebSocket GET
    // refused (get pods/exec), then the SPDY fallback's POST (create pods/exec), which kubectl prints.
    const before = api.requests.length;
    const viewer = await kubectl('viewer', ['exec', 'p1', '--', 'true']);
    expect({ code: viewer.code, err: viewer.err }).toEqual({ code: 1,
      err: 'Error from server (Forbidden): pods "p1" is forbidden: User "viewer" cannot create resource "pods/exec" in API group "" in the namespace "default"\n' });
    expect(api.requests.slice(before).filter((x) => x.path.endsWith('/exec')).map((x) => `${x.method} ${x.status}`)).toEqual(['GET 403', 'POST 403']);
    const missing = await kubectl('admin', ['exec', 'p1', '--', 'no-such-command-here']);
    expect(missing.code).toBe(1);
    expect(missing.err).toMatch(/error executing command in container: spawn no-such-command-here ENOENT/);
  }, 60_000);

  it('a session frame by frame (v5): the empty stdout message first, stdin echoed, [255, 0] ends it, the Success Status, a normal close', async () => {
    const up = await upgrade(execPath('p1', 'command=cat&stdin=true&stdout=true&stderr=true'));
    if (!('socket' in up)) throw new Error(`not upgraded: ${JSON.stringify(up)}`);
    expect(up.protocol).toBe('v5.channel.k8s.io');
    const events = await session(up, [Buffer.from([0, ...Buffer.from('abc')]), Buffer.from([255, 0])]);
    expect(events).toEqual([
      { type: 'message', binary: true, data: Buffer.from([1]) },
      { type: 'message', binary: true, data: Buffer.from([1, ...Buffer.from('abc')]) },
      { type: 'message', binary: true, data: Buffer.from([3, ...Buffer.from('{"metadata":{},"status":"Success"}')]) },
      { type: 'close', code: 1000, reason: '' },
    ]);
  }, 30_000);

  it('v4 when the client offers only it (no close signal: the command ends by itself); the exit code in the Status', async () => {
    const up = await upgrade(execPath('p1', 'command=sh&command=-c&command=read+x%3B+echo+got+%24x%3B+exit+5&stdin=1&stdout=1'), { protocol: 'v4.channel.k8s.io' });
    if (!('socket' in up)) throw new Error(`not upgraded: ${JSON.stringify(up)}`);
    expect(up.protocol).toBe('v4.channel.k8s.io');
    const events = await session(up, [Buffer.from([0, ...Buffer.from('line\n')])]);
    const messages = events.filter((e) => e.type === 'message').map((e) => (e as { data: Buffer }).data);
    expect(messages.map((m) => [m[0], m.subarray(1).toString()])).toEqual([
      [1, ''], [1, 'got line\n'],
      [3, JSON.stringify({ metadata: {}, status: 'Failure', message: 'command terminated with non-zero exit code: exit status 5', reason: 'NonZeroExitCode', details: { causes: [{ reason: 'ExitCode', message: '5' }] } })],
    ]);
  }, 30_000);

  it('answers before the upgrade with a Status: 404 for a missing pod, 400 for -t, SPDY, an unknown subprotocol, no command; 401 without a token; a plain request 400', async () => {
    const refusal = async (path: string, o: Parameters<typeof upgrade>[1] = {}) => {
      const r = await upgrade(path, o);
      if ('socket' in r) throw new Error('upgraded');
      return `${r.status} ${String(r.body.reason)}: ${String(r.body.message)}`;
    };
    expect(await refusal(execPath('nope', 'command=ls&stdout=1'))).toBe('404 NotFound: pods "nope" not found');
    expect(await refusal(execPath('p1', 'command=sh&stdin=1&stdout=1&tty=1'))).toBe('400 BadRequest: the lab API server allocates no TTY: run kubectl exec without -t (--tty)');
    expect(await refusal(execPath('p1', 'command=ls&stdout=1'), { upgrade: 'SPDY/3.1' })).toMatch(/^400 BadRequest: the lab API server runs exec over WebSocket only/);
    expect(await refusal(execPath('p1', 'command=ls&stdout=1'), { protocol: 'channel.k8s.io' })).toMatch(/^400 BadRequest: requested protocol\(s\) are not supported/);
    expect(await refusal(execPath('p1', 'stdout=1'))).toBe('400 BadRequest: PodExecOptions is invalid: command: Required value');
    expect(await refusal(execPath('p1', 'command=ls&stdout=1'), { token: 'wrong' })).toBe('401 Unauthorized: Unauthorized');
    expect(await refusal('/api/v1/namespaces/default/pods/p1/attach?stdout=1')).toMatch(/^404 NotFound: the lab API server upgrades only pods\/exec/);
    const plain = await new Promise<string>((resolve, reject) => {
      const u = new URL(api.url);
      request({ host: u.hostname, port: u.port, path: execPath('p1', 'command=ls&stdout=1'), method: 'POST', ca, headers: { authorization: 'Bearer admin-token' } }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (c: string) => { text += c; }).on('end', () => resolve(`${res.statusCode} ${(JSON.parse(text) as { message: string }).message}`));
      }).on('error', reject).end();
    });
    expect(plain).toBe('400 Upgrade request required');
  }, 30_000);
});

describe('the lab pod\'s netns', () => {
  it('the annotation names it, a hostNetwork pod has its node\'s, anything else none (nor a name that is no netns name)', () => {
    const of = (metadata: object, spec: object) => podNetns({ metadata: { name: 'x', ...metadata }, spec } as Obj);
    expect(of({ annotations: { [NETNS_ANNOTATION]: 'net-pod' } }, { nodeName: 'n1' })).toBe('net-pod');
    expect(of({}, { nodeName: 'myk8s-worker', hostNetwork: true })).toBe('myk8s-worker');
    expect(of({}, { nodeName: 'myk8s-worker' })).toBeUndefined();
    expect(of({ annotations: { [NETNS_ANNOTATION]: '../etc' } }, {})).toBeUndefined();
  });
});
