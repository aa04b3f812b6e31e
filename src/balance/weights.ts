// The final weight of a real server, composed from what decides it: the scheduler plugin's base
// weight and the slow-start ramp (a cluster-wide factor can join here). One small pure function so
// every input is applied in one place and in one order. pure: no I/O.

/** The kernel's largest destination weight (IPVS_DEST_ATTR_WEIGHT is a u32 the kernel keeps as int). */
export const MAX_WEIGHT = 0x7fffffff;

/**
 * Steps of the slow-start ramp per unit of base weight. A Service with slow start has every
 * weight multiplied by it, ramping or not, so a base weight of 1 can still ramp in small steps;
 * the schedulers slow start applies to compare weights only as ratios (slow-start.ts), so the
 * multiplication changes nothing else.
 */
export const RAMP_RESOLUTION = 100;

/** What decides one real server's weight. */
export interface WeightInputs {
  /** The plugin's weight (0 = keep idle, which no factor changes). */
  base: number;
  /** Slow-start ramp factor in [0, 1]; undefined when the Service has no slow start. */
  slowStart?: number | undefined;
}

/**
 * The weight to program: the base weight, times RAMP_RESOLUTION and the ramp factor when slow
 * start is on, rounded, never below 1 unless the base is 0 (weight 0 would quiesce a new
 * endpoint instead of ramping it), never above MAX_WEIGHT.
 */
export function composeWeight(i: WeightInputs): number {
  if (i.base <= 0) return 0;
  if (i.slowStart === undefined) return Math.min(i.base, MAX_WEIGHT);
  const f = Math.min(1, Math.max(0, i.slowStart));
  return Math.min(MAX_WEIGHT, Math.max(1, Math.round(i.base * RAMP_RESOLUTION * f)));
}
