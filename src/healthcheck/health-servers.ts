// The HTTP edges of kube-proxy's health checking: one listener set per health-check NodePort
// (ServiceHealthServers, after pkg/proxy/healthcheck/service_health.go) and the node-level proxy
// health server (ProxierHealthServer, kube-proxy's healthzBindAddress, /healthz and /livez).
// What they answer is computed in proxier-health.ts; what is wanted, in desired/health-checks.ts.
// A port that cannot be opened (in use) is a Problem of its Service and a log line, never a crash;
// it is tried again on the next sync.
import type { Server } from 'node:http';
import { http } from '../util/node-http.js';
import type { Problem } from '../desired/types.js';
import type { WantedHealthServer } from '../desired/health-checks.js';
import { parseHostPort } from '../model/host-port.js';
import type { Log } from '../util/log.js';
import { type HealthAnswer, type ProxierHealth, serviceHealthAnswer } from './proxier-health.js';

interface OpenPort {
  svc: WantedHealthServer;
  /** The addresses it listens on, joined (""= every address). */
  where: string;
  servers: Server[];
}

/** Listens on `port` at `host` (undefined: every address, IPv6 and IPv4 where the host has them). */
function listen(answer: (path: string) => HealthAnswer | undefined, port: number,
  host: string | undefined): Promise<Server> {
  const server = http.createServer((req, res) => {
    req.resume();
    const a = answer((req.url ?? '/').split('?')[0] ?? '/');
    if (!a) {
      res.destroy(); // closed meanwhile: kube-proxy writes nothing either
      return;
    }
    res.writeHead(a.status, a.headers);
    res.end(a.body);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    const done = () => {
      server.off('error', reject);
      server.on('error', () => undefined);
      resolve(server);
    };
    if (host === undefined) server.listen(port, done);
    else server.listen(port, host, done);
  });
}

function closeAll(servers: readonly Server[]): Promise<void> {
  return Promise.all(servers.map((s) => new Promise<void>((r) => {
    s.close(() => r());
    s.closeAllConnections();
  }))).then(() => undefined);
}

/** The health-check NodePorts' listeners, made to match the wanted set on each sync. */
export class ServiceHealthServers {
  private readonly open = new Map<number, OpenPort>();
  /** Ports whose last opening failed, with the error (logged once per distinct error). */
  private readonly failed = new Map<number, string>();

  constructor(private readonly proxyHealthy: () => boolean, private readonly log: Log,
    private readonly nodeName: string) {}

  /**
   * Opens the ports newly wanted, closes those no longer wanted (or wanted for another Service, or
   * on other addresses: reopened), updates counts in place. `addresses` undefined: listen on every
   * address (kube-proxy when nodePortAddresses is unset). One problem per port that could not be
   * opened (FailedToStartServiceHealthcheck, kube-proxy's Event reason); it is retried next call.
   */
  async sync(wanted: ReadonlyMap<number, WantedHealthServer>,
    addresses: readonly string[] | undefined): Promise<Problem[]> {
    const where = addresses === undefined ? '' : [...addresses].sort().join(',');
    for (const [port, o] of [...this.open]) {
      const w = wanted.get(port);
      if (w && w.namespace === o.svc.namespace && w.name === o.svc.name && o.where === where) continue;
      this.open.delete(port);
      this.log('info', 'closing health check', { service: `${o.svc.namespace}/${o.svc.name}`, port });
      await closeAll(o.servers);
    }
    for (const port of [...this.failed.keys()]) if (!wanted.has(port)) this.failed.delete(port);
    const problems: Problem[] = [];
    for (const [port, w] of wanted) {
      const o = this.open.get(port);
      if (o) {
        o.svc = w; // the count is read by the handler on each request
        continue;
      }
      const id = `${w.namespace}/${w.name}`;
      const entry: OpenPort = { svc: w, where, servers: [] };
      const answer = () => this.open.get(port) === entry
        ? serviceHealthAnswer(entry.svc.namespace, entry.svc.name, entry.svc.localEndpoints,
          this.proxyHealthy()) : undefined;
      try {
        for (const host of addresses === undefined ? [undefined] : addresses) {
          entry.servers.push(await listen(answer, port, host));
        }
        this.open.set(port, entry);
        this.failed.delete(port);
        this.log('info', 'opened health check', { service: id, port, addresses: addresses ?? 'all' });
      } catch (e) {
        await closeAll(entry.servers);
        const error = (e as Error).message;
        if (this.failed.get(port) !== error) this.log('warn', 'failed to start health check; retrying next sync',
          { service: id, port, error });
        this.failed.set(port, error);
        problems.push({ service: id, reason: 'FailedToStartServiceHealthcheck',
          message: `node ${this.nodeName} failed to start healthcheck "${id}" on port ${port}: ${error}` });
      }
    }
    return problems;
  }

  /** The open ports and what each answers for (for tests and status). */
  ports(): Map<number, WantedHealthServer> {
    return new Map([...this.open].map(([p, o]) => [p, o.svc]));
  }

  /** Closes every listener. */
  async close(): Promise<void> {
    const all = [...this.open.values()].flatMap((o) => o.servers);
    this.open.clear();
    await closeAll(all);
  }
}

/** The node-level proxy health server (kube-proxy's healthzBindAddress): /healthz and /livez. */
export class ProxierHealthServer {
  private server: Server | undefined;
  private addr = '';
  private lastError = '';

  constructor(private readonly health: ProxierHealth, private readonly log: Log) {}

  /** The address it listens on ("" when closed). */
  get address(): string {
    return this.addr;
  }

  /** The bound port (0 when closed): for tests that asked for port 0. */
  get port(): number {
    const a = this.server?.address();
    return a && typeof a === 'object' ? a.port : 0;
  }

  /**
   * Listens on `addr` (HOST:PORT, [v6]:PORT; "" closes it); a changed address closes the old
   * listener first. A failure is logged (once per distinct error) and returned; call again to retry.
   */
  ensure(addr: string): Promise<string | undefined> {
    const next = this.chain.then(() => this.ensureNow(addr));
    this.chain = next.then(() => undefined, () => undefined);
    return next;
  }

  /** Calls of ensure() and close() run one after the other. */
  private chain: Promise<void> = Promise.resolve();

  private async ensureNow(addr: string): Promise<string | undefined> {
    if (addr === this.addr && (this.server || addr === '')) return undefined;
    await this.closeNow();
    if (addr === '') return undefined;
    const parsed = parseHostPort(addr, { allowPortZero: true });
    const fail = (error: string) => {
      if (error !== this.lastError) this.log('warn', 'proxy health server not started; retrying next sync',
        { address: addr, error });
      this.lastError = error;
      return error;
    };
    if (!parsed.ok) return fail(`healthzBindAddress ${parsed.error}`);
    try {
      this.server = await listen((path) => this.route(path), parsed.addr.port, parsed.addr.host);
      this.addr = addr;
      this.lastError = '';
      this.log('info', 'proxy health server listening', { address: addr, port: this.port });
      return undefined;
    } catch (e) {
      return fail((e as Error).message);
    }
  }

  /** kube-proxy's mux: /healthz and /livez; anything else 404 as Go's ServeMux answers it. */
  private route(path: string): HealthAnswer {
    if (path === '/healthz') return this.health.healthz();
    if (path === '/livez') return this.health.livez();
    return { status: 404, headers: { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff' },
      body: '404 page not found\n' };
  }

  /** Closes the listener (nothing when closed). */
  close(): Promise<void> {
    const next = this.chain.then(() => this.closeNow());
    this.chain = next;
    return next;
  }

  private async closeNow(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    this.addr = '';
    if (s) await closeAll([s]);
  }
}
