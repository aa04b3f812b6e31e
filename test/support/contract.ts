// What the contract tables (test/support/*-contract.ts) share: how a case's run is checked, and
// the check that every call kind was tried with every outcome it can have.
import { expect } from '@jest/globals';

/** One case's run, as each table's runCase reports it. */
export interface CaseRun {
  setupFailures: string[];
  answer: string;
  errors?: readonly unknown[];
  before: string;
  after: string;
}

/**
 * Checks a run against its case: every set-up step succeeded, the answer is the case's, the
 * errors' predicates fit their codes (`mismatches` lists those that do not), and the state
 * afterwards is the case's `after` (unchanged from `before` when it has none).
 */
export function expectCase(run: CaseRun, c: { answer: string; after?: string }, mismatches: (errors: readonly unknown[]) => string[] = () => []): void {
  expect(run.setupFailures).toEqual([]);
  expect(run.answer).toBe(c.answer);
  expect(mismatches(run.errors ?? [])).toEqual([]);
  expect(run.after).toBe(c.after ?? run.before);
}

/** Call kinds whose tried categories are not exactly the required ones, as `kind: tried [..], required [..]` lines. */
export function coverageGaps<C>(cases: readonly C[], required: Readonly<Record<string, readonly string[]>>, kindOf: (c: C) => string,
  categoryOf: (c: C) => string): string[] {
  return Object.entries(required).flatMap(([kind, categories]) => {
    const tried = [...new Set(cases.filter((c) => kindOf(c) === kind).map(categoryOf))].sort();
    const want = [...categories].sort();
    return tried.join() === want.join() ? [] : [`${kind}: tried [${tried.join(', ')}], required [${want.join(', ')}]`];
  });
}
