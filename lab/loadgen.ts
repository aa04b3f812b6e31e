#!/usr/bin/env node
// Lab load generator, run in a client netns by topology.ts's runLoad:
//   node dist/lab/loadgen.js --url http://10.200.1.10/ --count 30 [--concurrency 1]
//     [--keep-alive] [--timeout-ms 5000] [--samples]
// prints one JSON LoadResult on stdout; with --samples it also carries every request's pod and
// latency (lab compare draws latency distributions from them). Responses are the pod servers'
// {"pod","peer"} bodies.
//   node dist/lab/loadgen.js --serve
// runs one batch per JSON line on stdin ({"id", ...BatchOptions}), batches at once if asked, and
// answers each with one line {"id","result"} or {"id","error"}; it exits when stdin ends. runLoad
// keeps one such process per client netns (load-agent.ts): a Node process's start costs 4-10 s of
// CPU in the TCG guest, more than most batches' requests.
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { batchOptions, runBatch } from './load-batch.js';

export type { BatchOptions, LoadResult } from './load-batch.js';

/** --serve: one batch per stdin line, answered by id; batches that overlap run at once. */
function serve(): Promise<void> {
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  const running = new Set<Promise<void>>();
  const answer = (o: object) => { process.stdout.write(`${JSON.stringify(o)}\n`); };
  // Whoever reads the answers is gone: nothing left to answer to.
  process.stdout.on('error', () => { process.exit(0); });
  lines.on('line', (line) => {
    let id: unknown = null;
    const one = (async () => {
      const req = JSON.parse(line) as Record<string, unknown>;
      id = req.id ?? null;
      answer({ id, result: await runBatch(batchOptions(req)) });
    })().catch((e: unknown) => { answer({ id, error: e instanceof Error ? e.message : String(e) }); })
      .finally(() => { running.delete(one); });
    running.add(one);
  });
  return new Promise((done) => { lines.once('close', () => { void Promise.all(running).then(() => done()); }); });
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      serve: { type: 'boolean', default: false },
      url: { type: 'string' },
      count: { type: 'string', default: '1' },
      concurrency: { type: 'string', default: '1' },
      'keep-alive': { type: 'boolean', default: false },
      'timeout-ms': { type: 'string', default: '5000' },
      samples: { type: 'boolean', default: false },
    },
  });
  if (values.serve) return serve();
  const o = batchOptions({ url: values.url, count: values.count, concurrency: values.concurrency, keepAlive: values['keep-alive'],
    timeoutMs: values['timeout-ms'], samples: values.samples });
  process.stdout.write(`${JSON.stringify(await runBatch(o))}\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`loadgen: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(2);
});
