// settleSync: what a sync leaves behind, from its plan and the kernel's answers, and nothing else.
// The plan decided beforehand what each answer means (its retry policy, its record delta); this
// applies those decisions to the per-op results the executor reports. pure: no I/O.
import type { IpvsError } from '../ipvs/errors.js';
import type { OpResult } from '../ipvs/types.js';
import type { IpvsOp } from '../model/ipvs.js';
import { applyRecordPlan } from './ownership.js';
import { type RetryState, updateRetries } from './retry.js';
import type { SyncPlan } from './sync.js';

/** The kernel's answer to each op of a plan, by id: undefined when applied, the error when refused. */
export type OpResults = readonly OpResult[];

/** An op the kernel refused, and its answer. */
export interface OpFailure {
  op: IpvsOp;
  error: IpvsError;
}

/** What a sync carries over from the last one. */
export interface SettleState {
  retries: RetryState;
  /** The ownership record; undefined when there is none yet. */
  record: ReadonlySet<string> | undefined;
}

/** What to record after a sync. */
export interface Settled {
  retries: RetryState;
  /** The record after the sync; undefined when the plan changes nothing in it. */
  record: Set<string> | undefined;
  /** The refused ops, in plan order. */
  refused: OpFailure[];
  /** Ops per kind and result (`ok` / `error`), for the ops metric. */
  counts: Array<{ kind: IpvsOp['kind']; result: 'ok' | 'error'; n: number }>;
}

/** Settles one sync (see the file comment); `results` holds one entry per op of `plan`. */
export function settleSync(plan: SyncPlan, results: OpResults, state: SettleState): Settled {
  const refused: OpFailure[] = [];
  const counts = new Map<string, { kind: IpvsOp['kind']; result: 'ok' | 'error'; n: number }>();
  plan.ops.forEach((op, id) => {
    const error = results[id];
    if (error) refused.push({ op, error });
    const result = error ? 'error' : 'ok';
    const label = `${op.kind} ${result}`;
    const c = counts.get(label);
    if (c) c.n++;
    else counts.set(label, { kind: op.kind, result, n: 1 });
  });
  const changes = plan.record.add.length + plan.record.remove.length > 0;
  return {
    retries: updateRetries(state.retries, plan.retry, plan.ops, refused),
    record: changes || !state.record ? applyRecordPlan(state.record ?? new Set(), plan.record, results) : undefined,
    refused,
    counts: [...counts.values()],
  };
}
