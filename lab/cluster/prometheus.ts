// Prometheus in the lab cluster: Debian's `prometheus` (a host package, lab/host.ts) scraping
// every node's operator (/metrics on the DaemonSet's --metrics-addr port) as a cluster's
// Prometheus would, so the README's PromQL and the Grafana dashboard's queries
// (manifests/grafana/) can be tried against real series from real kernels. It runs in the VM's
// root netns (the bridge reaches every node) with its data on the guest's tmpfs.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { stopChild } from '../proc.js';

/** The operator's metrics port in manifests/daemonset.yaml (--metrics-addr). */
export const OPERATOR_METRICS_PORT = 10262;
export const PROMETHEUS_PORT = 9090;
export const PROMETHEUS_JOB = 'ipvs-operator';

/** prometheus.yml scraping `targets` (host:port) every `intervalSeconds`, each labelled with its node. pure. */
export function prometheusConfig(targets: ReadonlyArray<{ node: string; address: string }>, intervalSeconds: number): string {
  const statics = targets.map((t) => `      - targets: ['${t.address}']\n        labels: { node: '${t.node}' }`).join('\n');
  return `global:\n  scrape_interval: ${intervalSeconds}s\n  evaluation_interval: ${intervalSeconds}s\n` +
    `scrape_configs:\n  - job_name: ${PROMETHEUS_JOB}\n    scrape_timeout: ${Math.max(1, intervalSeconds - 1)}s\n    static_configs:\n${statics}\n`;
}

/** One instant vector sample of a query's answer. */
export interface Sample { metric: Record<string, string>; value: number }

/** The answer of /api/v1/query, as Prometheus writes it. */
interface QueryAnswer { status: 'success' | 'error'; error?: string; data?: { resultType: string; result: Array<{ metric: Record<string, string>; value: [number, string] }> } }

export class LabPrometheus {
  private constructor(private readonly child: ChildProcess, readonly url: string, private stderr: () => string) {}

  /**
   * Starts `prometheus` listening on `listen` (host:port) with its data under `dir`, scraping
   * `targets`; resolves once its ready endpoint answers (rejects with its output when it exits).
   */
  static async start(o: { listen: string; dir: string; targets: ReadonlyArray<{ node: string; address: string }>; intervalSeconds?: number; binary?: string }): Promise<LabPrometheus> {
    mkdirSync(join(o.dir, 'data'), { recursive: true });
    const config = join(o.dir, 'prometheus.yml');
    writeFileSync(config, prometheusConfig(o.targets, o.intervalSeconds ?? 2));
    const child = spawn(o.binary ?? 'prometheus', [`--config.file=${config}`, `--storage.tsdb.path=${join(o.dir, 'data')}`,
      `--web.listen-address=${o.listen}`, '--storage.tsdb.retention.time=1d', '--log.level=warn'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr!.setEncoding('utf8').on('data', (d: string) => { err = (err + d).slice(-4000); });
    const exited = new Promise<never>((_, reject) => {
      child.once('error', (e) => reject(new Error(`prometheus did not start: ${e.message} (Debian's package: prometheus, lab/host.ts installs it)`)));
      child.once('exit', (code) => reject(new Error(`prometheus exited (${code}): ${err}`)));
    });
    exited.catch(() => undefined);
    const p = new LabPrometheus(child, `http://${o.listen}`, () => err);
    const deadline = Date.now() + 120_000;
    for (;;) {
      const ready = await Promise.race([get(`${p.url}/-/ready`).then((r) => r.code === 200, () => false), exited]);
      if (ready) return p;
      if (Date.now() > deadline) {
        await p.stop();
        throw new Error(`prometheus is not ready after 120 s: ${err}`);
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  /** An instant query: its samples; rejects with Prometheus's own error (a PromQL syntax error, say). */
  async query(expr: string): Promise<Sample[]> {
    const r = await get(`${this.url}/api/v1/query?query=${encodeURIComponent(expr)}`);
    const a = JSON.parse(r.body) as QueryAnswer;
    if (a.status !== 'success' || !a.data) throw new Error(`prometheus: ${expr}: ${a.error ?? r.body.slice(0, 200)}`);
    if (a.data.resultType !== 'vector') throw new Error(`prometheus: ${expr}: a ${a.data.resultType}, not a vector`);
    return a.data.result.map((s) => ({ metric: s.metric, value: Number(s.value[1]) }));
  }

  /** The scrape targets' health, by node label. */
  async targets(): Promise<Map<string, string>> {
    const r = await get(`${this.url}/api/v1/targets?state=active`);
    const a = JSON.parse(r.body) as { data?: { activeTargets?: Array<{ labels?: Record<string, string>; health?: string }> } };
    return new Map((a.data?.activeTargets ?? []).map((t) => [t.labels?.node ?? '?', t.health ?? '?']));
  }

  /** Its last output on stderr (warnings and errors). */
  get log(): string {
    return this.stderr();
  }

  async stop(): Promise<void> {
    await stopChild(this.child, 10_000);
  }
}

function get(url: string): Promise<{ code: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { timeout: 10_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => { body += d; }).on('end', () => resolve({ code: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}
