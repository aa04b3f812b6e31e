// A real server's weights under the cluster load view: the plugin's weigh() or base × cluster
// weight, then this node's first choice tilted in. pure.
import type { DesiredVirtualServer, Problem } from '../model/desired.js';
import { type RealServer, realServerKey } from '../model/ipvs.js';
import type { DampingConfig } from './damping.js';
import { MAX_WEIGHT } from './weights.js';
import { tiltFirstChoice } from './first-choice.js';

/** A plugin's weigh() (plugins/types.ts), as ClusterWeights calls it. */
export type Weigh = (endpoints: readonly { address: string; port: number; weight: number }[],
  view: { weights: ReadonlyMap<string, number>; firstChoice?: string }) => number[];

/** What weighing needs besides the entry: the damping bounds and the plugins' weigh(). */
export interface WeighOptions {
  damping: DampingConfig;
  weighOf: (plugin: string) => Weigh | undefined;
}

/** A real server's weight under a cluster weight: base × cluster (0 stays 0: a quiesced endpoint). */
export function clusterWeight(base: number, cluster: number): number {
  if (base <= 0) return 0;
  return Math.min(MAX_WEIGHT, base * cluster);
}

/**
 * The real servers with the view's weights: the plugin's weigh() when it has one (given frozen
 * copies; its answer checked), else base × cluster weight; then this node's first choice made
 * its idle choice as its scheduler allows (tiltFirstChoice).
 */
export function weighDests(
  o: WeighOptions, e: DesiredVirtualServer, w: ReadonlyMap<string, number>, firstChoice: string | undefined,
  service: string, problems: Problem[],
): RealServer[] {
  const dests = weighed(o, e, w, firstChoice, service, problems);
  if (firstChoice === undefined) return dests;
  const first = dests.findIndex((rs) => realServerKey(rs) === firstChoice);
  const tilted = tiltFirstChoice(dests.map((rs) => rs.weight), first, MAX_WEIGHT, e.vs.scheduler);
  return dests.map((rs, i) => (tilted[i] === rs.weight ? rs : { ...rs, weight: tilted[i]! }));
}

function weighed(
  o: WeighOptions, e: DesiredVirtualServer, w: ReadonlyMap<string, number>, firstChoice: string | undefined,
  service: string, problems: Problem[],
): RealServer[] {
  const byDefault = () => e.dests.map((rs) => (
    { ...rs, weight: clusterWeight(rs.weight, w.get(realServerKey(rs)) ?? o.damping.maxWeight) }));
  const weigh = o.weighOf(e.origin.plugin);
  if (!weigh) return byDefault();
  try {
    const view = { weights: new Map(w), ...(firstChoice === undefined ? {} : { firstChoice }) };
    const endpoints = e.dests.map((rs) => Object.freeze({ address: rs.address, port: rs.port, weight: rs.weight }));
    const answer: unknown = weigh(Object.freeze(endpoints), Object.freeze(view));
    const bad = (x: unknown) => !Number.isInteger(x) || (x as number) < 0 || (x as number) > MAX_WEIGHT;
    if (!Array.isArray(answer) || answer.length !== e.dests.length || answer.some(bad)) {
      throw new Error(
        `weigh() must return ${e.dests.length} integers in 0..${MAX_WEIGHT}, got ` +
        `${JSON.stringify(answer)?.slice(0, 120)}`);
    }
    return e.dests.map((rs, i) => ({ ...rs, weight: answer[i] as number }));
  } catch (err) {
    if (!problems.some((p) => p.service === service && p.reason === 'PluginWeighFailed')) {
      const message = `plugin ${e.origin.plugin}: ${(err as Error).message}; weights × the view's`;
      problems.push({ service, reason: 'PluginWeighFailed', message });
    }
    return byDefault();
  }
}
