// When the files source (files.ts) reads its directory again: an fs.watch on it, renewed when a
// new directory takes its name, the files it names read after a quiet time (all of them when it
// names none), a retry when the watcher fails, and a periodic rescan as the safety net.
import { type FSWatcher, watch } from 'node:fs';
import type { Log } from '../util/log.js';
import { isManifestName } from './files-parse.js';
import { dirId } from './manifest-dir.js';

/** The directory and the timings, as FilesSourceOptions gives them. */
export interface DirWatchOptions {
  dir: string;
  debounceMs?: number;
  retryMs?: number;
  rescanMs?: number;
}

/** What the watcher asks of its source. */
export interface DirWatchTarget {
  log: Log;
  /** Reads the whole directory again. */
  rescan(): Promise<void>;
  /** Reads these files again. */
  reread(names: readonly string[]): Promise<void>;
  stopped(): boolean;
}

/** Watches one directory for its source (see the file comment). */
export class DirWatch {
  private watcher: FSWatcher | undefined;
  /** The directory the watcher watches (dev:ino): a new directory under the name needs a new watcher. */
  private watchedId: string | undefined;
  /** Files the watcher named since the last read; `true`: a change it could not name (read all). */
  private pending: Set<string> | true = new Set();
  private timer: NodeJS.Timeout | undefined;
  private rescanTimer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: DirWatchOptions, private readonly t: DirWatchTarget) {}

  /** The identity of the directory watched (undefined before it is watched). */
  get id(): string | undefined {
    return this.watchedId;
  }

  /** The safety net: the directory read again every rescanMs, whatever the watcher saw. */
  armRescan(): void {
    if (this.t.stopped()) return;
    this.rescanTimer = setTimeout(() => {
      void this.t.rescan().finally(() => this.armRescan());
    }, this.opts.rescanMs ?? 30_000);
    this.rescanTimer.unref?.();
  }

  /** Stops the timers and the watcher. */
  stop(): void {
    clearTimeout(this.timer);
    clearTimeout(this.rescanTimer);
    this.watcher?.close();
    this.watcher = undefined;
  }

  /** Watches DIR (again, when it is a new directory under the same name). */
  async watchDir(): Promise<void> {
    if (this.t.stopped()) return;
    const id = await dirId(this.opts.dir);
    if (this.watcher && id === this.watchedId) return;
    this.watcher?.close();
    this.watcher = undefined;
    if (id === undefined) return; // gone: the rescan watches it again when it is back
    try {
      this.watcher = watch(this.opts.dir, { persistent: false }, (_event, name) => this.changed(name));
      this.watcher.on('error', (e) => this.watchFailed(e));
      this.watchedId = id;
    } catch (e) {
      this.watchFailed(e as Error);
    }
  }

  private watchFailed(e: Error): void {
    this.t.log('error', 'watching the manifest directory failed; retrying', { dir: this.opts.dir, error: e.message });
    this.watcher?.close();
    this.watcher = undefined;
    if (this.t.stopped()) return;
    this.timer = setTimeout(() => {
      void this.watchDir();
      this.changed(null);
    }, this.opts.retryMs ?? 1000);
  }

  /**
   * A watcher event: the file it names is read again after the quiet time (all of DIR when
   * unnamed or hidden).
   */
  private changed(name: string | Buffer | null): void {
    if (this.t.stopped()) return;
    const n = typeof name === 'string' ? name : undefined;
    if (n === undefined || n.startsWith('.')) this.pending = true;
    else if (!isManifestName(n)) return; // an editor's backup or swap file: nothing the source reads
    else if (this.pending !== true) this.pending.add(n);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      const pending = this.pending;
      this.pending = new Set();
      void (pending === true ? this.t.rescan() : this.t.reread([...pending]));
    }, this.opts.debounceMs ?? 100);
  }
}
