// The operator's API client (src/kube/client.ts): credentials from a kubeconfig and from the
// in-cluster service account as client-go reads them, the requests it sends (checked by a real
// HTTP(S) server that records them), its errors, and the hand-over to client-node's KubeConfig
// for exec users (a real exec plugin: a shell script printing an ExecCredential).
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { type IncomingMessage, type Server, createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { KubeClient, loadKubeClient, pager } from '../../../src/kube/client.js';
import { scratchDir } from '../../support/scratch.js';
import { inClusterCredentials, kubeconfigCredentials, readSmallFile } from '../../../src/kube/credentials.js';
import { KubeApiError } from '../../../src/kube/transport.js';
import { describeError, httpStatus, retryAfterMs } from '../../../src/kube/informer.js';
import { makeSelfSignedCert } from '../../../lab/cluster/tls.js';

interface Seen { method: string; url: string; auth?: string; type?: string; body: string }

/** A server that records each request and answers with `answer(req)` (status, body, headers). */
async function recorder(answer: (r: Seen) => [number, unknown, Record<string, string>?], tls?: { cert: string; key: string }) {
  const seen: Seen[] = [];
  const handler = (req: IncomingMessage, res: import('node:http').ServerResponse) => {
    let body = '';
    req.setEncoding('utf8').on('data', (d: string) => { body += d; }).on('end', () => {
      const r: Seen = { method: req.method!, url: req.url!, auth: req.headers.authorization, type: req.headers['content-type'], body };
      seen.push(r);
      const [code, out, headers] = answer(r);
      res.writeHead(code, { 'Content-Type': 'application/json', ...headers }).end(typeof out === 'string' ? out : JSON.stringify(out));
    });
  };
  const server: Server = tls ? createHttpsServer({ cert: readFileSync(tls.cert), key: readFileSync(tls.key) }, handler) : createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `${tls ? 'https' : 'http'}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { seen, url, close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }) };
}

const dir = scratchDir('kube-client-');
const kubeconfig = (cluster: Record<string, unknown>, user: Record<string, unknown>) => JSON.stringify({
  apiVersion: 'v1', kind: 'Config', 'current-context': 'c',
  contexts: [{ name: 'c', context: { cluster: 'k', user: 'u' } }],
  clusters: [{ name: 'k', cluster }], users: [{ name: 'u', user }],
});

describe('kubeconfig credentials', () => {
  it('reads the current context: server, CA and client cert from -data (base64) or files relative to the kubeconfig', () => {
    writeFileSync(join(dir, 'ca.pem'), 'CA PEM');
    writeFileSync(join(dir, 'tok'), 'file-token\n');
    const file = join(dir, 'config');
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    expect(kubeconfigCredentials(kubeconfig({ server: 'https://10.0.0.1:6443', 'certificate-authority': 'ca.pem', 'tls-server-name': 'api' },
      { 'client-certificate-data': b64('CERT'), 'client-key-data': b64('KEY'), tokenFile: 'tok' }), file)).toEqual({
      server: 'https://10.0.0.1:6443', ca: 'CA PEM', cert: 'CERT', key: 'KEY', insecureSkipTLSVerify: false, tlsServerName: 'api',
      token: undefined, tokenFile: join(dir, 'tok'), username: undefined, password: undefined,
    });
  });

  it.each<[string, string, RegExp]>([
    ['not YAML', '{ unclosed: [', /kubeconfig .*config: not YAML/],
    ['no current-context', JSON.stringify({ clusters: [] }), /no current-context/],
    ['a context naming no cluster there', JSON.stringify({ 'current-context': 'c', contexts: [{ name: 'c', context: { cluster: 'gone' } }] }), /no cluster named "gone"/],
    ['a cluster without a server', kubeconfig({}, {}), /cluster "k" has no server/],
    ['a CA file that is missing', kubeconfig({ server: 'https://x', 'certificate-authority': 'nope.pem' }, {}), /reading certificate-authority nope\.pem: ENOENT/],
    ['a token that is a number', kubeconfig({ server: 'https://x' }, { token: 12345 }), /token must be a string, not 12345/],
    ['a server that is a list', kubeconfig({ server: ['https://x'] }, {}), /cluster\.server must be a string, not \["https:\/\/x"\]/],
    ['insecure-skip-tls-verify as text', kubeconfig({ server: 'https://x', 'insecure-skip-tls-verify': 'true' }, {}), /insecure-skip-tls-verify must be true or false, not "true"/],
  ])('refuses %s with a message naming the file', (_what, text, message) => {
    expect(() => kubeconfigCredentials(text, join(dir, 'config'))).toThrow(message);
  });

  it('without --kubeconfig: the service account when KUBERNETES_SERVICE_HOST is set, else $KUBECONFIG', async () => {
    const empty = scratchDir('no-sa-');
    await expect(loadKubeClient(undefined, { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' }, empty))
      .rejects.toThrow(`in-cluster configuration: no service account token at ${join(empty, 'token')}`);
    writeFileSync(join(dir, 'env-config'), kubeconfig({ server: 'https://10.9.9.9:6443' }, { token: 'x' }));
    expect((await loadKubeClient(undefined, { KUBECONFIG: join(dir, 'env-config') })).server).toBe('https://10.9.9.9:6443');
    expect((await loadKubeClient(join(dir, 'env-config'), { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' })).server).toBe('https://10.9.9.9:6443');
  });

  it('the in-cluster service account: server from the environment (IPv6 in brackets), its CA, its token file', () => {
    const sa = scratchDir('sa-');
    writeFileSync(join(sa, 'token'), 'sa-token');
    writeFileSync(join(sa, 'ca.crt'), 'SA CA');
    expect(inClusterCredentials({ KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' }, sa))
      .toEqual({ server: 'https://[fd00::1]:443', ca: 'SA CA', tokenFile: join(sa, 'token') });
    expect(() => inClusterCredentials({ KUBERNETES_SERVICE_HOST: '10.0.0.1' }, sa)).toThrow(/KUBERNETES_SERVICE_PORT must be set/);
    expect(() => inClusterCredentials({ KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' }, dir)).toThrow(/no service account token/);
  });
});

describe('requests', () => {
  let srv: Awaited<ReturnType<typeof recorder>>;
  beforeAll(async () => {
    srv = await recorder((r) => r.url.startsWith('/notalist') ? [200, { kind: 'Status', items: 'none' }] : r.url.startsWith('/busy') ? [429, { kind: 'Status', message: 'slow down' }, { 'Retry-After': '7' }]
      : r.url.startsWith('/text') ? [200, 'not json'] : [200, { echo: r.body ? JSON.parse(r.body) as unknown : null, metadata: { continue: r.url.includes('continue') ? '' : 'next' }, ...(r.method === 'GET' ? { items: [] } : {}) }]);
  });
  afterAll(async () => { await srv.close(); });

  it('sends the bearer token from the token file, the query encoded, and a JSON body', async () => {
    writeFileSync(join(dir, 'rtok'), 'tok-1\n');
    const c = KubeClient.fromCredentials({ server: `${srv.url}/`, tokenFile: join(dir, 'rtok') });
    expect(await c.request('POST', '/api/v1/namespaces/ns1/events', { body: { a: 1 } })).toEqual({ echo: { a: 1 }, metadata: { continue: 'next' } });
    const page = pager<{ items: unknown[]; metadata: { continue: string } }>(c, '/api/v1/nodes', { fieldSelector: 'metadata.name=n 1', limit: 2 });
    await page(undefined);
    await page('tok/+=');
    expect(srv.seen.slice(-3).map((s) => [s.method, s.url, s.auth, s.type])).toEqual([
      ['POST', '/api/v1/namespaces/ns1/events', 'Bearer tok-1', 'application/json'],
      ['GET', '/api/v1/nodes?fieldSelector=metadata.name%3Dn+1&limit=2', 'Bearer tok-1', undefined],
      ['GET', '/api/v1/nodes?fieldSelector=metadata.name%3Dn+1&limit=2&continue=tok%2F%2B%3D', 'Bearer tok-1', undefined],
    ]);
    c.close();
  });

  it('a list answer without an items array is an error naming the path', async () => {
    await expect(pager<{ items: unknown[] }>(KubeClient.fromCredentials({ server: srv.url }), '/notalist')(undefined))
      .rejects.toThrow('GET /notalist: the answer is not a list (no items array)');
  });

  it('basic auth from username and password; no header without credentials', async () => {
    await KubeClient.fromCredentials({ server: srv.url, username: 'u', password: 'p:w' }).request('GET', '/x');
    await KubeClient.fromCredentials({ server: srv.url }).request('GET', '/y');
    expect(srv.seen.slice(-2).map((s) => s.auth)).toEqual([`Basic ${Buffer.from('u:p:w').toString('base64')}`, undefined]);
  });

  it('a non-2xx answer is a KubeApiError the informers read: status, Retry-After, the Status message', async () => {
    const e = await KubeClient.fromCredentials({ server: srv.url }).request('GET', '/busy').catch((x: unknown) => x);
    expect(e).toBeInstanceOf(KubeApiError);
    expect([httpStatus(e), retryAfterMs(e), describeError(e)]).toEqual([429, 7000, '429 Too Many Requests: slow down']);
    expect((e as Error).message).toBe('GET /busy: HTTP 429 Too Many Requests');
    await expect(KubeClient.fromCredentials({ server: srv.url }).request('GET', '/text')).rejects.toThrow('GET /text: the answer is not JSON: not json');
  });

  it('refuses a server that is not http(s), and names a refused connection', async () => {
    expect(() => KubeClient.fromCredentials({ server: 'ftp://x' })).toThrow('is not an http(s) URL');
    const gone = await recorder(() => [200, {}]);
    await gone.close();
    await expect(KubeClient.fromCredentials({ server: gone.url }).request('GET', '/')).rejects.toThrow(/ECONNREFUSED/);
  });
});

describe('TLS and the hand-over to client-node', () => {
  it('trusts the kubeconfig\'s CA and refuses a server it does not vouch for', async () => {
    const tlsDir = scratchDir('tls-');
    const { cert, key } = makeSelfSignedCert(tlsDir);
    const srv = await recorder(() => [200, { ok: true }], { cert, key });
    try {
      writeFileSync(join(tlsDir, 'config'), kubeconfig({ server: srv.url, 'certificate-authority': cert }, { token: 't' }));
      expect(await (await loadKubeClient(join(tlsDir, 'config'))).request('GET', '/ok')).toEqual({ ok: true });
      const other = makeSelfSignedCert(scratchDir('tls-'));
      writeFileSync(join(tlsDir, 'config2'), kubeconfig({ server: srv.url, 'certificate-authority': other.cert }, { token: 't' }));
      await expect((await loadKubeClient(join(tlsDir, 'config2'))).request('GET', '/ok')).rejects.toThrow(/self[- ]signed|signature|verify/i);
      expect(srv.seen.map((s) => s.auth)).toEqual(['Bearer t']);
    } finally {
      await srv.close();
    }
  });

  it('an exec user goes to client-node\'s KubeConfig: the plugin\'s token is sent', async () => {
    const srv = await recorder(() => [200, { ok: true }]);
    try {
      const plugin = join(dir, 'plugin.sh');
      writeFileSync(plugin, '#!/bin/sh\necho \'{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-exec"}}\'\n', { mode: 0o755 });
      // (client-node refuses plain HTTP unless insecure-skip-tls-verify is set; kubectl does not.)
      writeFileSync(join(dir, 'exec-config'), kubeconfig({ server: srv.url, 'insecure-skip-tls-verify': true }, { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: plugin, interactiveMode: 'Never' } }));
      const c = await loadKubeClient(join(dir, 'exec-config'));
      expect(await c.request('GET', '/ok')).toEqual({ ok: true });
      expect(srv.seen.map((s) => s.auth)).toEqual(['Bearer from-exec']);
    } finally {
      await srv.close();
    }
  });
});

describe('credentials against a careless or hostile node (issue "Never wedged")', () => {
  const dir = scratchDir('kube-creds-');
  const config = (cluster: string, user = 'token: t') =>
    `apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: {${cluster}}}]\nusers: [{name: u, user: {${user}}}]\n`;

  it('no kubeconfig and not in a pod: an error naming what was looked for, never http://localhost:8080', async () => {
    const home = process.env.HOME;
    process.env.HOME = scratchDir('no-home-');
    try {
      await expect(loadKubeClient(undefined, {})).rejects.toMatchObject({
        name: 'NoCredentialsError', message: expect.stringMatching(/no --kubeconfig, not in a pod \(KUBERNETES_SERVICE_HOST unset\), \$KUBECONFIG unset and no .*\.kube\/config/),
      });
    } finally {
      process.env.HOME = home;
    }
  });

  it('a server that is not a URL is an error naming cluster.server, not a bare TypeError', async () => {
    const file = join(dir, 'bad-server');
    writeFileSync(file, config('server: "::not a url::"'));
    await expect(loadKubeClient(file, {})).rejects.toThrow(/cluster\.server "::not a url::" is not a URL/);
  });

  it('a FIFO as certificate-authority is refused at once (start-up never blocks on it)', async () => {
    const fifo = join(dir, 'ca.fifo');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const file = join(dir, 'fifo-ca');
    writeFileSync(file, config(`server: "https://127.0.0.1:6443", certificate-authority: ${fifo}`));
    await expect(loadKubeClient(file, {})).rejects.toThrow(/reading certificate-authority .*ca\.fifo: .*is not a regular file/);
    expect(() => readSmallFile(fifo)).toThrow(/not a regular file/);
  });

  it('a credential file over the size limit is refused', () => {
    const big = join(dir, 'big');
    writeFileSync(big, 'x'.repeat(2000));
    expect(() => readSmallFile(big, 1000)).toThrow(/larger than 1000 bytes/);
    expect(readSmallFile(big, 2000)).toHaveLength(2000);
  });

  it('a rotated token file found empty or gone keeps the last good token; empty from the start is an error', async () => {
    const token = join(dir, 'token');
    writeFileSync(token, 'first\n');
    const c = KubeClient.fromCredentials({ server: 'http://127.0.0.1:1', tokenFile: token });
    const auth = async () => (await c.applyToFetchOptions()).headers.Authorization;
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'setTimeout', 'setInterval', 'queueMicrotask'] });
    try {
      jest.setSystemTime(1_000_000);
      expect(await auth()).toBe('Bearer first');
      writeFileSync(token, '');
      jest.setSystemTime(1_000_000 + 61_000);
      expect(await auth()).toBe('Bearer first');
      writeFileSync(token, 'second');
      jest.setSystemTime(1_000_000 + 62_000);
      expect(await auth()).toBe('Bearer second');
    } finally {
      jest.useRealTimers();
    }
    const empty = join(dir, 'empty-token');
    writeFileSync(empty, '  \n');
    const d = KubeClient.fromCredentials({ server: 'http://127.0.0.1:1', tokenFile: empty });
    await expect(d.applyToFetchOptions()).rejects.toThrow(/token file .*empty-token: it is empty/);
  });
});
