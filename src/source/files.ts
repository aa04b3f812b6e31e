// FilesSource (`--source files:DIR`): Services, EndpointSlices, this node's Node and the
// IPVSProxyConfig from a directory of YAML files, for labs, demos and machines without a cluster.
// This file reads and watches; what a file's text gives, which objects are used and which events
// go out are decided in files-parse.ts (pure).
// What it reads and when, and its decisions (which Node, which config, a malformed file, the
// same object twice): docs/hardening.md.
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { validateConfig } from '../config/load.js';
import type { ConfigResult } from '../config/schema.js';
import { type Problem } from '../desired/types.js';
import { ConfigGate } from './config-gate.js';
import { problemKey } from './dedup.js';
import { type Log, noLog } from '../util/log.js';
import {
  type FileEntry, type SentState, diffObjects, isManifestName, parseFile, selectObjects, unreadableFile,
} from './files-parse.js';
import type { Source, SourceEvent, SourceHealth } from './types.js';
import { MAX_FILE_BYTES, ReadBuffer, dirId, readRegularBytes, yamlFiles } from './manifest-dir.js';
import { DirWatch } from './dir-watch.js';

export interface FilesSourceOptions {
  dir: string;
  /** This node's name: the only Node object used. */
  nodeName: string;
  log?: Log;
  /** The source's own problems (malformed files, invalid config), the whole current list, on every change of it. */
  onProblems?: (problems: readonly Problem[]) => void;
  /** Quiet time after a change before the directory is read again (editors write in several steps). */
  debounceMs?: number;
  /** How long to wait before watching again after the watcher failed. */
  retryMs?: number;
  /** Period of the safety-net rescan (default 30 s). */
  rescanMs?: number;
  /** Reads a file (default fs/promises readFile): a seam for read failures root never sees. */
  readFile?: (path: string) => Promise<string>;
  /** Config validation (default: the CRD schema's). */
  validate?: (obj: unknown) => ConfigResult;
}

/** Reads and watches a directory of YAML manifests (see the file comment). */
export class FilesSource implements Source {
  private readonly log: Log;
  /** What was sent: the config through the gate, the other objects by key. */
  private readonly sentState: SentState;
  /** Last good objects of each file. */
  private readonly files = new Map<string, FileEntry>();
  /** byFile: the problem of each file that could not be used (unreadable, malformed), while it lasts. */
  private readonly problemState: { byFile: Map<string, Problem>; current: Problem[] } = {
    byFile: new Map(), current: [],
  };
  /** When the directory is read again. */
  private readonly dirWatch: DirWatch;
  /**
   * The event handler, the queue of reads, the stop flag, the last event version, and the one
   * buffer files are read into while no other read holds it (reads are queued one at a time; the
   * first scan runs before anything is queued): a rescan that finds every file as it was
   * allocates nothing per file and decodes none (parseFile compares bytes).
   */
  private readonly run: {
    onEvent: ((e: SourceEvent) => void) | undefined; queue: Promise<void>; stopped: boolean; version: number;
    buffer: ReadBuffer;
  } = { onEvent: undefined, queue: Promise.resolve(), stopped: false, version: 0, buffer: new ReadBuffer() };
  /** Whether the directory could be read, its last error, and since when healthy() says what it says. */
  private readonly dirHealth: { ok: boolean; lastError: string | undefined; seen: { ok: boolean; since: number } } = {
    ok: false, lastError: undefined, seen: { ok: false, since: Date.now() },
  };

  constructor(private readonly opts: FilesSourceOptions) {
    this.log = opts.log ?? noLog;
    const gate = new ConfigGate(opts.validate ?? validateConfig);
    this.sentState = { gate, sent: new Map(), nextVersion: () => ++this.run.version };
    this.dirWatch = new DirWatch(opts, {
      log: this.log, rescan: () => this.rescan(), reread: (names) => this.reread(names),
      stopped: () => this.run.stopped,
    });
  }

  /** Reads DIR and sends its objects, then watches it. Rejects when DIR cannot be read at all. */
  async start(onEvent: (e: SourceEvent) => void): Promise<void> {
    this.run.onEvent = onEvent;
    this.run.stopped = false;
    await this.scan(true);
    await this.dirWatch.watchDir();
    this.dirWatch.armRescan();
  }

  /** healthy(), with when it last changed and the directory's last error. */
  health(): SourceHealth {
    const h = this.dirHealth;
    return { ...h.seen, ...(h.seen.ok || !h.lastError ? {} : { reason: h.lastError }) };
  }

  /** Records whether the directory could be read, and when that changed. */
  private setOk(ok: boolean, error?: string): void {
    this.dirHealth.ok = ok;
    this.dirHealth.lastError = ok ? undefined : error;
    if (ok !== this.dirHealth.seen.ok) this.dirHealth.seen = { ok, since: Date.now() };
  }

  healthy(): boolean {
    return this.dirHealth.ok;
  }

  async stop(): Promise<void> {
    this.run.stopped = true;
    this.dirWatch.stop();
    await this.run.queue;
  }

  /** The source's own problems as last found (malformed files, duplicates, invalid config). */
  problems(): readonly Problem[] {
    return this.problemState.current;
  }

  /** Reads the directory again now (after queued reads); resolves when its events were sent. */
  rescan(): Promise<void> {
    this.run.queue = this.run.queue.then(() => this.scan(false));
    return this.run.queue;
  }

  /** Reads these files of DIR again (after queued reads), as the watcher does for the files it names. */
  reread(names: readonly string[]): Promise<void> {
    this.run.queue = this.run.queue.then(() => this.readSome(names.filter(isManifestName)));
    return this.run.queue;
  }

  private async scan(initial: boolean): Promise<void> {
    if (this.run.stopped) return;
    let names: string[];
    try {
      names = await yamlFiles(this.opts.dir);
    } catch (e) {
      const error = (e as Error).message;
      if (initial) throw new Error(`cannot read manifest directory ${this.opts.dir}: ${error}`);
      await this.dirWatch.watchDir(); // a directory that is gone: its watcher goes with it
      // Send nothing: what was programmed stays until the directory can be read again.
      const fields = { dir: this.opts.dir, error };
      if (this.dirHealth.ok) this.log('error', 'cannot read the manifest directory; keeping the last objects', fields);
      this.setOk(false, `cannot read ${this.opts.dir}: ${error}`);
      return;
    }
    if (!initial) await this.dirWatch.watchDir();
    const listed = new Set(names);
    for (const name of [...this.files.keys()]) if (!listed.has(name)) this.files.delete(name);
    const byFile = this.problemState.byFile;
    for (const name of [...byFile.keys()]) if (!listed.has(name)) byFile.delete(name);
    await this.readFiles(names, false);
  }

  /** Reads the named files only (the watcher's path); a name that is no longer a file drops its objects. */
  private async readSome(names: readonly string[]): Promise<void> {
    if (this.run.stopped) return;
    // Files vanish with their directory too: that is not a deletion of their objects. The full
    // scan tells the two apart (an unreadable directory keeps every last object).
    if (await dirId(this.opts.dir) !== this.dirWatch.id) return this.scan(false);
    await this.readFiles(names, true);
  }

  /** Reads `names`, keeps each file's last good objects, then sends what changed. */
  private async readFiles(names: readonly string[], checkType: boolean): Promise<void> {
    const kept = this.run.buffer.held ? undefined : this.run.buffer;
    if (kept) kept.held = true;
    try {
      await this.readEach(names, checkType, kept);
    } finally {
      if (kept) kept.held = false;
    }
    this.setOk(true);
    if (this.run.stopped) return;
    const problems = [...this.problemState.byFile.keys()].sort().map((n) => this.problemState.byFile.get(n)!);
    const events = diffObjects(selectObjects(this.files, this.opts.nodeName, problems), this.sentState, problems);
    for (const e of events) this.emit(e);
    this.setProblems(problems);
  }

  /** Reads each of `names` (into `buffer` when given) and keeps its last good objects or its problem. */
  private async readEach(names: readonly string[], checkType: boolean, buffer: ReadBuffer | undefined): Promise<void> {
    const seam = this.opts.readFile;
    for (const name of names) {
      let content: string | Buffer;
      try {
        const path = join(this.opts.dir, name);
        if (seam) {
          const st = await stat(path);
          if (!st.isFile()) {
            throw Object.assign(new Error('not a regular file'), { code: checkType ? 'ENOENT' : 'ENOTREG' });
          }
          content = await seam(path);
        } else {
          // The full scan lists regular files (symlinks followed); a named change may be anything.
          content = await readRegularBytes(path, MAX_FILE_BYTES, false, buffer);
        }
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') {
          this.files.delete(name); // removed (or removed between readdir and read)
          this.problemState.byFile.delete(name);
          continue;
        }
        this.problemState.byFile.set(name, unreadableFile(name, (e as Error).message, this.files.has(name)));
        continue;
      }
      const r = parseFile(name, content, this.files.get(name));
      if ('problem' in r) {
        this.problemState.byFile.set(name, r.problem);
        continue;
      }
      if ('entry' in r) {
        if (r.skipped.length) {
          this.log('debug', 'skipping objects of kinds not read', { file: name, objects: r.skipped });
        }
        this.files.set(name, r.entry);
      }
      this.problemState.byFile.delete(name);
    }
  }

  private emit(e: SourceEvent): void {
    if (!this.run.stopped) this.run.onEvent?.(e);
  }

  private setProblems(problems: Problem[]): void {
    const before = new Set(this.problemState.current.map(problemKey));
    const changed = problems.length !== this.problemState.current.length
      || problems.some((p) => !before.has(problemKey(p)));
    this.problemState.current = problems;
    if (!changed) return;
    // Reported once: to onProblems (which logs or posts them) when given, else here.
    if (this.opts.onProblems) this.opts.onProblems(problems);
    else {
      for (const p of problems) {
        if (!before.has(problemKey(p))) this.log('warn', p.message, { reason: p.reason, dir: this.opts.dir });
      }
    }
  }
}
