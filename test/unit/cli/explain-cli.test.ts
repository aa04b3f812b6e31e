// `ipvs-operator explain` as a person runs it: the real CLI process, on examples/lab and on an API
// server that is not there. It answers, or fails with a message; it never hangs or exits 0 on a
// Service that does not exist.
import { describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../../..', import.meta.url));
const CLI = fileURLToPath(new URL('../../../src/cli/main.js', import.meta.url));
const explain = (...args: string[]) => spawnSync(process.execPath, [CLI, 'explain', ...args], { cwd: root, encoding: 'utf8', timeout: 60_000 });

describe('explain', () => {
  it('explains a Service of examples/lab', () => {
    const r = explain('default/webpod-rr', '--source', 'files:examples/lab', '--node-name', 'lab-node');
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('TCP 10.200.1.10:80 rr');
  }, 60_000);

  it('a Service the source does not have is an error (exit 1)', () => {
    const r = explain('default/nope', '--source', 'files:examples/lab');
    expect(r.status).toBe(1);
    expect(r.stderr).toBe('ipvs-operator explain: Service default/nope not found\n');
  }, 60_000);

  it('an API server that does not answer is an error naming what failed, not a hang', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ipvsop-kubeconfig-'));
    try {
      const kubeconfig = join(dir, 'config');
      // Port 1 on loopback: nothing listens there, the connection is refused at once.
      writeFileSync(kubeconfig, [
        'apiVersion: v1', 'kind: Config', 'current-context: c',
        'clusters: [{name: c, cluster: {server: "http://127.0.0.1:1", insecure-skip-tls-verify: true}}]',
        'contexts: [{name: c, context: {cluster: c, user: u}}]', 'users: [{name: u, user: {token: t}}]', '',
      ].join('\n'));
      const r = explain('default/web', '--source', 'kube', '--kubeconfig', kubeconfig);
      expect(r.status).toBe(1);
      expect(r.stderr).toMatch(/^ipvs-operator explain: listing \w+ from http:\/\/127\.0\.0\.1:1 failed: .*ECONNREFUSED/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
