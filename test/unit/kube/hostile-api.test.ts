// The real CLI process (`run --source kube --dry-run`) against an API server that misbehaves on
// purpose (test/support/hostile-apiserver.ts), one scenario a process: the process stays alive,
// /healthz turns red within the bound while the API is broken (or stays green where the bad input
// is only skipped), everything converges to the API's objects once it behaves, RSS stays bounded,
// and SIGTERM ends it. Short bounds by flag: --health-bound 1, --api-timeout 2.
import { afterAll, describe, expect, it } from '@jest/globals';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { KubernetesObject } from '@kubernetes/client-node';
import { KubeClient } from '../../../src/kube/client.js';
import { Reflector } from '../../../src/kube/reflector.js';
import { HOSTILE_MODES, type HostileMode, HostileApiServer } from '../../support/hostile-apiserver.js';
import { freePort } from '../../support/net.js';
import { waitFor } from '../../support/operator-process.js';

/** The process's exit code, or a note if it is still running `ms` after now. */
async function exitWithin(op: Run, ms: number): Promise<number | null | string> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string>((r) => { timer = setTimeout(() => r(`still running ${ms / 1000} s after SIGTERM`), ms); });
  try {
    return await Promise.race([op.exited, late]);
  } finally {
    clearTimeout(timer);
  }
}

const CLI = fileURLToPath(new URL('../../../src/cli/main.js', import.meta.url));
/** RSS the process must stay under, whatever the server sends (an idle operator is ~100 MB). */
const RSS_BOUND_MB = 300;
const dir = mkdtempSync(join(tmpdir(), 'hostile-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Modes where the API is broken (the source goes down); the others only send input to skip. */
const SKIPPED_ONLY: readonly HostileMode[] = ['malformed-lines', 'malformed-items', 'gone-410'];

async function status(port: number, path: string): Promise<number> {
  try {
    return (await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(3000) })).status;
  } catch {
    return 0;
  }
}

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

interface Run { child: ChildProcess; out: () => string; exited: Promise<number | null>; port: number }

async function startOperator(server: HostileApiServer, name: string): Promise<Run> {
  const kubeconfig = join(dir, `${name}.kubeconfig`);
  writeFileSync(kubeconfig, `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "${server.url}"}}]\n` +
    'users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n');
  const port = await freePort();
  const child = spawn(process.execPath, [CLI, 'run', '--source', 'kube', '--kubeconfig', kubeconfig, '--node-name', 'hostile-node', '--dry-run',
    '--no-iptables', '--metrics-addr', `127.0.0.1:${port}`, '--health-bound', '1', '--api-timeout', '2', '--log-format', 'json'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
  child.stderr!.on('data', (d: Buffer) => { out += d.toString(); });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, out: () => out, exited, port };
}

describe('the CLI process against a hostile API server', () => {
  it.concurrent.each(HOSTILE_MODES)('%s: alive, red while broken, converges after, bounded memory, SIGTERM ends it', async (mode) => {
    const server = await HostileApiServer.start();
    server.mode = mode;
    const op = await startOperator(server, mode);
    try {
      const alive = () => op.child.exitCode === null && op.child.signalCode === null;
      if (SKIPPED_ONLY.includes(mode)) {
        // Bad input is skipped, not fatal: the good objects beside it are programmed and health stays green.
        await waitFor(`${mode}: ready`, async () => (await status(op.port, '/readyz')) === 200, 45_000, 200);
        const vip = mode === 'malformed-lines' ? '10.96.0.11:80' : '10.96.0.10:80';
        await waitFor(`${mode}: ${vip} planned`, () => op.out().includes(`add-service TCP ${vip}`), 45_000, 200);
        if (mode === 'gone-410') await waitFor('relists after 410', () => (server.counts.get('list services') ?? 0) >= 3, 45_000, 200);
        else {
          const metrics = await (await fetch(`http://127.0.0.1:${op.port}/metrics`)).text();
          expect(metrics).toMatch(new RegExp(`ipvsop_api_malformed_total\\{resource="services",reason="${mode === 'malformed-items' ? 'list item' : 'watch line'}: [^"]+"\\} [1-9]`));
        }
        expect(await status(op.port, '/healthz')).toBe(200);
      } else {
        await waitFor(`${mode}: /healthz and /readyz red`, async () => (await status(op.port, '/healthz')) === 503 && (await status(op.port, '/readyz')) === 503, 45_000, 200);
        expect({ mode, alive: alive() }).toEqual({ mode, alive: true });
      }
      server.behave();
      await waitFor(`${mode}: green after the server behaves`, async () => (await status(op.port, '/readyz')) === 200 && (await status(op.port, '/healthz')) === 200, 60_000, 200);
      await waitFor(`${mode}: both Services planned`, () => op.out().includes('add-service TCP 10.96.0.10:80') && op.out().includes('add-service TCP 10.96.0.11:80'), 30_000, 200);
      expect({ mode, alive: alive(), rssUnderBound: rssMb(op.child.pid!) < RSS_BOUND_MB }).toEqual({ mode, alive: true, rssUnderBound: true });
      expect(op.out()).not.toMatch(/UnhandledPromiseRejection|RangeError|TypeError/);
      op.child.kill('SIGTERM');
      const code = await exitWithin(op, 5000);
      expect({ mode, code }).toEqual({ mode, code: 0 });
    } finally {
      op.child.kill('SIGKILL');
      await server.close();
    }
  }, 150_000);

  it('SIGTERM while the first lists never answer ends the process within 5 s, exit 0', async () => {
    const server = await HostileApiServer.start();
    server.mode = 'never-answer';
    const op = await startOperator(server, 'sigterm');
    try {
      await waitFor('the list request arrived', () => (server.counts.get('list services') ?? 0) >= 1, 30_000, 100);
      op.child.kill('SIGTERM');
      const code = await exitWithin(op, 5000);
      expect(code).toBe(0);
    } finally {
      op.child.kill('SIGKILL');
      await server.close();
    }
  }, 60_000);
});

describe('the CLI process against a careless or hostile files source', () => {
  it('a file emptied, then swapped for a FIFO: alive, no Service deleted, SIGTERM ends it within 5 s', async () => {
    const src = mkdtempSync(join(dir, 'files-'));
    const svc = (name: string, ip: string) => `apiVersion: v1\nkind: Service\nmetadata: {name: ${name}, namespace: default}\nspec: {clusterIP: ${ip}, ports: [{port: 80, protocol: TCP}]}\n`;
    writeFileSync(join(src, 'a.yaml'), svc('a', '10.96.1.10'));
    writeFileSync(join(src, 'b.yaml'), svc('b', '10.96.1.11'));
    const port = await freePort();
    const child = spawn(process.execPath, [CLI, 'run', '--source', `files:${src}`, '--node-name', 'n1', '--dry-run', '--no-iptables',
      '--metrics-addr', `127.0.0.1:${port}`, '--log-format', 'json'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
    child.stderr!.on('data', (d: Buffer) => { out += d.toString(); });
    const op: Run = { child, out: () => out, exited: new Promise((r) => child.once('exit', (code) => r(code))), port };
    try {
      await waitFor('both planned', () => out.includes('add-service TCP 10.96.1.10:80') && out.includes('add-service TCP 10.96.1.11:80'), 30_000, 100);
      writeFileSync(join(src, 'a.yaml'), '');
      await waitFor('the empty-file problem', () => out.includes('EmptyManifestFile'), 30_000, 100);
      // Made under a hidden name (never read) and renamed over b.yaml: b.yaml is never missing, as
      // it was between a remove and the mkfifo, where a busy machine's source saw b deleted.
      expect(spawnSync('mkfifo', [join(src, '.b.fifo')]).status).toBe(0);
      renameSync(join(src, '.b.fifo'), join(src, 'b.yaml'));
      await waitFor('the FIFO refused', () => /b\.yaml: cannot be read: not a regular file/.test(out), 30_000, 100);
      writeFileSync(join(src, 'c.yaml'), svc('c', '10.96.1.12'));
      await waitFor('a later file still read', () => out.includes('add-service TCP 10.96.1.12:80'), 30_000, 100);
      expect({ alive: child.exitCode === null, deleted: out.match(/delete-service[^"\n]*/g) ?? [] }).toEqual({ alive: true, deleted: [] });
      child.kill('SIGTERM');
      expect(await exitWithin(op, 5000)).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  }, 90_000);
});

describe('a Reflector ending its watch', () => {
  it('drops the old connection on every relist: one watch stays open, not one per relist', async () => {
    const server = await HostileApiServer.start();
    const client = KubeClient.fromCredentials({ server: server.url });
    const seen: string[] = [];
    const r = new Reflector<KubernetesObject>({
      name: 'services', path: '/api/v1/services', pageSize: 100, client, log: () => undefined,
      handlers: { upsert: (o) => seen.push(o.metadata!.name!), delete: () => undefined },
      healing: { backoff: { initialMs: 10, maxMs: 50, jitter: 0 }, relistMs: 0, idleMs: 0, watchTimeoutSeconds: 0, maxRetryAfterMs: 1000 },
    });
    try {
      r.start();
      await r.synced();
      for (let i = 1; i <= 4; i++) {
        await waitFor(`watch ${i} open`, () => (server.counts.get('watch services') ?? 0) === i && r.up, 10_000, 10);
        expect(r.relistNow()).toBe(true);
      }
      await waitFor('the fifth watch', () => (server.counts.get('watch services') ?? 0) === 5, 10_000, 10);
      await waitFor('the old watches closed', () => server.openServiceWatches === 1, 10_000, 10);
      expect(server.counts.get('list services')).toBe(5);
    } finally {
      await r.stop();
      client.close();
      await server.close();
    }
  });
});
