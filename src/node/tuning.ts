// What `run` keeps set on the node while it runs, besides the IPVS table: the sysctls kube-proxy's
// IPVS mode sets (kernel.ts), strictARP as the configuration says (arp.ts) and the IPVS timeouts
// it names; set again when ip_vs is loaded again (a reloaded module starts from its defaults).
// Every failure is a log line, never a throw: a node whose sysctls cannot be written still gets
// its virtual servers.
import type { ProxyConfig } from '../config/types.js';
import type { IpvsClient } from '../ipvs/types.js';
import type { IpvsTimeouts } from '../model/ipvs.js';
import type { Log } from '../util/log.js';
import { applyStrictArp } from './arp.js';
import { applySysctls, ipvsSysctls } from './kernel.js';

export interface NodeTuningOptions {
  /** Where the timeouts are set (in a dry run, its printing client). */
  ipvs: Pick<IpvsClient, 'setTimeouts'>;
  kernelRelease: string;
  /** Where strictARP keeps the node's own ARP settings (arp.ts). */
  stateDir: string;
  /** A dry run writes no sysctl and no ARP setting; the timeouts still go to `ipvs`. */
  dryRun: boolean;
  /** strictARP until a configuration arrives. */
  strictArp: boolean;
  log: Log;
}

/** The node's settings around the IPVS table, following the configuration. */
export class NodeTuning {
  private timeouts: IpvsTimeouts | undefined;
  private strictArp: boolean;
  private sourceStarted = false;

  constructor(private readonly o: NodeTuningOptions) {
    this.strictArp = o.strictArp;
  }

  /** At start: the sysctls (not in a dry run); each one not set is a warning. */
  setSysctls(): void {
    if (!this.o.dryRun) this.writeSysctls();
  }

  /**
   * A configuration from the source: its IPVS timeouts now (none set: left as they are), and its
   * strictARP once the source has started (not before, so a restart never flaps it off and on).
   */
  async configure(config: ProxyConfig): Promise<void> {
    const { tcpTimeout: tcp, tcpFinTimeout: tcpFin, udpTimeout: udp } = config;
    this.timeouts = tcp || tcpFin || udp ? { tcp, tcpFin, udp } : undefined;
    if (this.timeouts) await this.setTimeouts(this.timeouts);
    this.strictArp = config.strictARP;
    if (this.sourceStarted) await this.syncStrictArp();
  }

  /** The source delivered its first lists: strictARP as configured, and on every change from now on. */
  async sourceStart(): Promise<void> {
    this.sourceStarted = true;
    await this.syncStrictArp();
  }

  /** ip_vs was loaded again (the loop's onKernelReset): the sysctls and the timeouts, set again. */
  async kernelReset(): Promise<void> {
    this.writeSysctls();
    if (this.timeouts) await this.setTimeouts(this.timeouts);
  }

  private writeSysctls(): void {
    for (const p of applySysctls(ipvsSysctls(this.o.kernelRelease))) this.o.log('warn', 'sysctl not set',
      { problem: p });
  }

  private async setTimeouts(t: IpvsTimeouts): Promise<void> {
    await this.o.ipvs.setTimeouts(t).catch((err: unknown) => this.o.log('warn', 'IPVS timeouts not set',
      { error: (err as Error).message }));
  }

  private async syncStrictArp(): Promise<void> {
    if (this.o.dryRun) return;
    try {
      const note = await applyStrictArp(this.strictArp, this.o.stateDir);
      if (note) this.o.log('info', note);
    } catch (err) {
      this.o.log('warn', 'sysctl not set', { problem: `strictARP: ${(err as Error).message}` });
    }
  }
}
