// CLI edges: listen addresses (one parser, src/model/host-port.ts, used by the CLI and serveHttp),
// a plugin whose import never settles (run must fail, not exit 0), `explain` of a missing Service.
import { describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../support/net.js';
import { formatHostPort, parseHostPort } from '../../../src/model/host-port.js';
import { serveHttp } from '../../../src/healthcheck/http.js';
import { Metrics } from '../../../src/metrics/metrics.js';
import { PluginRegistry } from '../../../plugins/index.js';
import { PluginLoadTimeoutError, loadPluginsFrom } from '../../../src/plugins/load.js';
import { ServiceNotFoundError } from '../../../src/cli/explain.js';

const root = fileURLToPath(new URL('../../../..', import.meta.url));
const CLI = fileURLToPath(new URL('../../../src/cli/main.js', import.meta.url));
const cli = (args: string[]) => spawnSync(process.execPath, [CLI, ...args], { cwd: root, encoding: 'utf8', timeout: 60_000 });

describe('parseHostPort', () => {
  it.each<[string, string, number]>([
    ['0.0.0.0:10249', '0.0.0.0', 10249],
    ['127.0.0.1:10249', '127.0.0.1', 10249],
    ['[::]:10249', '::', 10249],
    ['[::1]:8080', '::1', 8080],
    ['[fd00::1]:1', 'fd00::1', 1],
    ['localhost:65535', 'localhost', 65535],
    ['metrics.kube-system.svc:9100', 'metrics.kube-system.svc', 9100],
  ])('accepts %s', (text, host, port) => {
    expect(parseHostPort(text)).toEqual({ ok: true, addr: { host, port } });
    expect(formatHostPort({ host, port })).toBe(text);
  });

  it.each<[string, string]>([
    ['', 'empty address'],
    [':', 'no host (use 0.0.0.0 for every address)'],
    [':10249', 'no host (use 0.0.0.0 for every address)'],
    ['127.0.0.1:', 'no port'],
    ['127.0.0.1', 'no :PORT'],
    ['10249', 'no :PORT'],
    ['127.0.0.1:0', 'port 0 would listen on a random port'],
    ['127.0.0.1:65536', 'port 65536 is above 65535'],
    ['127.0.0.1:99999', 'port 99999 is above 65535'],
    ['127.0.0.1:-1', 'port "-1" is not a number'],
    ['127.0.0.1:http', 'port "http" is not a number'],
    ['127.0.0.1:1e3', 'port "1e3" is not a number'],
    ['127.0.0.1: 80', 'port " 80" is not a number'],
    ['::1:8080', 'an IPv6 address needs brackets'],
    ['[::1]8080', 'no :PORT after ]'],
    ['[::1:8080', 'no closing ]'],
    ['[127.0.0.1]:80', '"127.0.0.1" in brackets is not an IPv6 address'],
    ['[]:80', '"" in brackets is not an IPv6 address'],
    ['256.0.0.1:80', '"256.0.0.1" is not an IP address or host name'],
    ['bad host:80', '"bad host" is not an IP address or host name'],
    ['-x:80', '"-x" is not an IP address or host name'],
  ])('refuses %j: %s', (text, why) => {
    const r = parseHostPort(text);
    expect(r.ok).toBe(false);
    expect(r.ok ? '' : r.error).toBe(`${JSON.stringify(text)}: ${why} (expected HOST:PORT or [IPv6]:PORT, e.g. 0.0.0.0:10249)`);
  });

  it('port 0 only when asked for (tests listening on any free port)', () => {
    expect(parseHostPort('127.0.0.1:0', { allowPortZero: true })).toEqual({ ok: true, addr: { host: '127.0.0.1', port: 0 } });
  });
});

describe('serveHttp with the same parser', () => {
  it('listens on [::1]:port and refuses a bad address before listening', async () => {
    let server;
    try {
      server = await serveHttp('[::1]:0', () => ({ healthy: true, ready: true, reason: '' }), new Metrics());
    } catch (e) {
      // A host without IPv6 loopback cannot run this half; the refusal half below still runs.
      expect((e as NodeJS.ErrnoException).code).toMatch(/EADDRNOTAVAIL|EAFNOSUPPORT/);
    }
    if (server) {
      const a = server.address() as { address: string; port: number };
      expect(a.address).toBe('::1');
      const res = await fetch(`http://[::1]:${a.port}/healthz`);
      expect(await res.text()).toBe('ok\n');
      await new Promise((r) => server.close(r));
    }
    await expect(serveHttp('127.0.0.1:', () => ({ healthy: true, ready: true, reason: '' }), new Metrics()))
      .rejects.toThrow('listen address "127.0.0.1:": no port');
  });
});

describe('the CLI refuses a bad address at argument-parse time (usage error, exit 2)', () => {
  it.each([[''], [':'], ['127.0.0.1:'], ['127.0.0.1:0'], ['[::1]:70000']])('run --metrics-addr %j', (addr) => {
    const r = cli(['run', '--source', 'files:examples/lab', '--dry-run', '--metrics-addr', addr]);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(`ipvs-operator run: --metrics-addr ${JSON.stringify(addr)}: `);
    expect(r.stderr).toContain('usage: ipvs-operator run');
  });

  it('status --operator-addr 127.0.0.1:', () => {
    const r = cli(['status', '--operator-addr', '127.0.0.1:']);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('ipvs-operator status: --operator-addr "127.0.0.1:": no port');
  });
});

describe('a plugin whose top-level await never settles', () => {
  const withDir = async (files: Record<string, string>, f: (dir: string) => unknown): Promise<void> => {
    const dir = mkdtempSync(join(tmpdir(), 'ipvs-plugins-'));
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    try {
      await f(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  const HANG = 'await new Promise(() => {});\nexport const plugin = {};\n';

  it('loadPluginsFrom rejects with PluginLoadTimeoutError naming the file, within the bound', async () => {
    await withDir({ 'a-hangs.mjs': HANG }, async (dir) => {
      const err = await loadPluginsFrom(dir, new PluginRegistry(), { timeoutMs: 200 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PluginLoadTimeoutError);
      expect(err).toMatchObject({ path: join(dir, 'a-hangs.mjs'), timeoutMs: 200 });
      expect((err as Error).message).toBe(`plugin ${join(dir, 'a-hangs.mjs')} did not finish loading within 0.2 s (a top-level await that never settles?); remove or fix it`);
    });
  });

  it('`run` fails with exit code 1 and says which file (it used to exit 0 silently)', async () => {
    const metricsAddr = `127.0.0.1:${await freePort()}`;
    await withDir({ 'a-hangs.mjs': HANG }, (dir) => {
      const r = cli(['run', '--source', 'files:examples/lab', '--dry-run', '--metrics-addr', metricsAddr,
        '--plugins-dir', dir, '--plugin-load-timeout', '0.3']);
      expect(r.status).toBe(1);
      expect(r.stderr).toContain(`ipvs-operator run: plugin ${join(dir, 'a-hangs.mjs')} did not finish loading within 0.3 s`);
    });
  });

  it('--plugin-load-timeout must be a positive number of seconds', () => {
    const r = cli(['run', '--source', 'files:examples/lab', '--dry-run', '--plugin-load-timeout', '0']);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--plugin-load-timeout must be 0 < SECONDS <= 3600, not "0"');
  });
});

describe('explain of a Service that does not exist', () => {
  it('ServiceNotFoundError is printed by main as an error, exit code 1', () => {
    expect(new ServiceNotFoundError('default/nope').message).toBe('Service default/nope not found');
  });
});
