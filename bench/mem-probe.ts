// Preloaded into the operator process by bench/host-process.ts (`node --expose-gc --import
// dist/bench/mem-probe.js dist/src/cli/main.js run ...`): on SIGUSR2 it collects garbage and
// writes process.memoryUsage(), v8.getHeapStatistics() and each heap space's size as JSON to $IPVSOP_MEM_PROBE. With
// $IPVSOP_HEAP_SNAPSHOT set, it also writes a heap snapshot there. Bench-only; the operator's code
// knows nothing of it.
import { writeFileSync } from 'node:fs';
import { getHeapSpaceStatistics, getHeapStatistics, writeHeapSnapshot } from 'node:v8';

const out = process.env.IPVSOP_MEM_PROBE;
if (out) {
  process.on('SIGUSR2', () => {
    (globalThis as { gc?: () => void }).gc?.();
    const snapshot = process.env.IPVSOP_HEAP_SNAPSHOT;
    if (snapshot) writeHeapSnapshot(snapshot);
    const spaces = Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name, { size: s.space_size, used: s.space_used_size }]));
    writeFileSync(out, JSON.stringify({ memory: process.memoryUsage(), heap: getHeapStatistics(), spaces }));
  });
}
