// One long-lived `loadgen.js --serve` per client netns, for topology.ts's runLoad: a Node
// process's start costs 4-10 s of CPU in the TCG guest (Node 24), more than most batches' own
// requests, and the tests run hundreds of batches. Each batch is one JSON line to the agent and
// one line back (lab/loadgen.ts).
//
// An agent holds its netns alive, so it must end before its netns is deleted (deleteNetns,
// cleanupTopology and the lab cluster's pod deletion call stopLoadAgent(s)); a netns deleted and
// made again under the same name is a new one (its nsfs inode), and gets a new agent. The agent's
// pipes keep this process's event loop alive only while a batch is out.
import { spawn, type ChildProcess } from 'node:child_process';
import { statSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import type { BatchOptions, LoadResult } from './load-batch.js';

interface Waiter { resolve: (r: LoadResult) => void; reject: (e: Error) => void }

interface Agent {
  child: ChildProcess;
  /** The netns it entered (`dev:inode` of /run/netns/<name>). */
  nsId: string;
  waiting: Map<number, Waiter>;
  stderr: string;
}

const agents = new Map<string, Agent>();
let nextId = 1;
let exitHooked = false;

/** The identity of a named netns, or undefined when there is none. */
function nsIdentity(name: string): string | undefined {
  try {
    const s = statSync(`/run/netns/${name}`);
    return `${s.dev}:${s.ino}`;
  } catch {
    return undefined;
  }
}

/** Holds the event loop while a batch is out, and lets it go when none is. */
function hold(a: Agent, on: boolean): void {
  for (const s of [a.child.stdout, a.child.stdin, a.child.stderr] as Array<(Readable | Writable) & { ref?: () => void; unref?: () => void } | null>) {
    if (on) s?.ref?.(); else s?.unref?.();
  }
  if (on) a.child.ref(); else a.child.unref();
}

function startAgent(ns: string, nsId: string, loadgen: string): Agent {
  if (!exitHooked) {
    exitHooked = true;
    process.on('exit', () => { for (const a of agents.values()) a.child.kill('SIGKILL'); });
  }
  const child = spawn('ip', ['netns', 'exec', ns, process.execPath, loadgen, '--serve'], { stdio: ['pipe', 'pipe', 'pipe'] });
  const a: Agent = { child, nsId, waiting: new Map(), stderr: '' };
  let buf = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    buf += d;
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      let msg: { id?: number; result?: LoadResult; error?: string };
      try { msg = JSON.parse(line) as typeof msg; } catch { continue; }
      const w = a.waiting.get(msg.id ?? -1);
      if (!w) continue;
      a.waiting.delete(msg.id!);
      if (a.waiting.size === 0) hold(a, false);
      if (msg.result) w.resolve(msg.result); else w.reject(new Error(`loadgen in ${ns}: ${msg.error ?? 'no result'}`));
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { a.stderr = (a.stderr + d).slice(-4000); });
  child.stdin!.on('error', () => { /* the exit below says why */ });
  const gone = (why: string) => {
    if (agents.get(ns) === a) agents.delete(ns);
    for (const w of a.waiting.values()) w.reject(new Error(`loadgen in ${ns} ${why}: ${a.stderr.trim()}`));
    a.waiting.clear();
  };
  child.once('error', (e) => gone(`could not start (${e.message})`));
  child.once('exit', (code, signal) => gone(`exited with ${code ?? signal}`));
  agents.set(ns, a);
  hold(a, false);
  return a;
}

/**
 * Runs one batch from netns `ns` in its agent (started on first use), or undefined when there is
 * no such named netns (the caller then runs loadgen as a process, which says why it failed).
 */
export function agentBatch(ns: string, opts: BatchOptions, loadgen: string): Promise<LoadResult> | undefined {
  const nsId = nsIdentity(ns);
  if (nsId === undefined) return undefined;
  let a = agents.get(ns);
  if (a && a.nsId !== nsId) {
    stopAgent(ns, a);
    a = undefined;
  }
  const agent = a ?? startAgent(ns, nsId, loadgen);
  const id = nextId++;
  return new Promise<LoadResult>((resolve, reject) => {
    agent.waiting.set(id, { resolve, reject });
    hold(agent, true);
    agent.child.stdin!.write(`${JSON.stringify({ id, ...opts })}\n`);
  });
}

function stopAgent(ns: string, a: Agent): Promise<void> {
  if (agents.get(ns) === a) agents.delete(ns);
  if (a.child.exitCode !== null || a.child.signalCode !== null) return Promise.resolve();
  return new Promise<void>((done) => {
    const timer = setTimeout(() => { a.child.kill('SIGKILL'); }, 3000);
    a.child.once('exit', () => { clearTimeout(timer); done(); });
    hold(a, true);
    a.child.stdin!.end();
  });
}

/** Ends netns `ns`'s agent (a batch still out gets 3 s, then fails), so the netns can go. */
export function stopLoadAgent(ns: string): Promise<void> {
  const a = agents.get(ns);
  return a ? stopAgent(ns, a) : Promise.resolve();
}

/** Ends every agent. */
export async function stopLoadAgents(): Promise<void> {
  await Promise.all([...agents.keys()].map(stopLoadAgent));
}
