// This node's IPVSLoadReport: the opted-in virtual servers' counters read from the kernel
// readsPerPeriod times a period, averaged, and written once a period at most, only when the
// values moved (or stayed silent for two periods). ClusterView (cluster-view.ts) drives it.
import type { IpvsClient } from '../ipvs/types.js';
import { REPORTS_PATH, countersByView, reportObject } from '../balance/cluster-view.js';
import type { BackendCounters } from '../balance/estimate.js';
import { shouldReport } from '../balance/reporting.js';
import { type ClusterViewOptions, type PutObject, defaultMove } from './cluster-view-options.js';
import { type ActiveSums, type SentReport, addSample, readingOf } from './cluster-view-steps.js';
import { FailureLog } from './informer.js';

/** Reads the kernel and writes this node's report (see the file comment). */
export class LoadReporter {
  private sent: SentReport | undefined;
  /** Active connections summed over this period's reads, per `viewKey backend`. */
  private activeSums: ActiveSums = new Map();
  private reportVersion: string | undefined;
  private readonly failures: FailureLog;

  constructor(
    private readonly o: ClusterViewOptions, private readonly periodMs: number, private readonly now: () => number,
    private readonly put: PutObject,
  ) {
    this.failures = new FailureLog(o.log, 'writing the IPVSLoadReport');
  }

  /**
   * The opted-in virtual servers' counters now, per view key: one dump of real servers per opted-in
   * virtual server (the kernel answers an empty dump for one not programmed yet, which is left
   * out), never a dump of every virtual server: a node with 30 000 Services and one opted in reads
   * that one, readsPerPeriod times a period.
   */
  private async readKernel(): Promise<Map<string, BackendCounters[]> | undefined> {
    if (this.o.weights.optedIn().size === 0) return undefined;
    const read: Array<{ viewKey: string; dests: Awaited<ReturnType<IpvsClient['listRealServers']>> }> = [];
    for (const { vs, viewKey } of this.o.weights.optedServers()) {
      const dests = await this.o.ipvs.listRealServers(vs);
      if (dests.length) read.push({ viewKey, dests });
    }
    return countersByView(read);
  }

  /**
   * One read of the active connections between reports. A single read at report time is a sample
   * of a few connections per node, mostly 0 for a fast backend at low load (which then counted as
   * "not measured", and the view never moved); the report carries the mean of every read of the
   * period instead, a time average.
   */
  async sample(): Promise<void> {
    addSample(this.activeSums, await this.readOrLog());
  }

  /** readKernel, a failure logged (once per kind) as undefined: nothing to sample or report. */
  private async readOrLog(): Promise<Map<string, BackendCounters[]> | undefined> {
    try {
      return await this.readKernel();
    } catch (e) {
      this.failures.failed(e);
      return undefined;
    }
  }

  /** The period's report: read, averaged, written when it moved enough (a failure is logged). */
  async report(): Promise<void> {
    const at = this.now();
    const views = await this.readOrLog();
    const sums = this.activeSums;
    this.activeSums = new Map();
    if (!views) return;
    const { reading, conns } = readingOf(views, sums, this.sent, at);
    if (!shouldReport(this.sent?.reading, reading, this.o.move ?? defaultMove(this.periodMs))) return;
    const body = reportObject(this.o.nodeName, at, views);
    try {
      this.reportVersion = await this.put(REPORTS_PATH, this.o.nodeName, body, this.reportVersion);
      this.sent = { reading, conns, at };
      this.failures.succeeded();
    } catch (e) {
      this.reportVersion = undefined;
      this.failures.failed(e);
    }
  }
}
