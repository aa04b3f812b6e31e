// Notices a reloaded ip_vs: the client's generic netlink family id changed since the last look.
import type { OperatorDeps } from './operator-types.js';

/** Tracks OperatorDeps.kernelGeneration between syncs. */
export class KernelGeneration {
  /** kernelGeneration as last seen. */
  private generation: number | undefined;

  constructor(private readonly deps: Pick<OperatorDeps, 'kernelGeneration' | 'onKernelReset' | 'log'>) {}

  /**
   * Whether the client now talks to another IPVS than at the last look (ip_vs loaded again); then
   * onKernelReset (a throw is logged, not passed on).
   */
  async reset(): Promise<boolean> {
    const g = this.deps.kernelGeneration?.();
    if (g === undefined) return false;
    const before = this.generation;
    this.generation = g;
    if (before === undefined || before === g) return false;
    this.deps.log('warn',
      'ip_vs was loaded again (its generic netlink family changed): full resync, sysctls and timeouts set again',
      { familyBefore: before, familyNow: g });
    try {
      await this.deps.onKernelReset?.();
    } catch (e) {
      this.deps.log('warn', 'setting up the reloaded ip_vs failed', { error: (e as Error).message });
    }
    return true;
  }
}
