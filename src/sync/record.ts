// The ownership record (src/plan/ownership.ts) on disk: the keys of the virtual servers the
// operator created or took over, one per line, in a file under /run — which, like the kernel's
// IPVS table, does not survive a reboot. Written whole to a temporary file and renamed, so a
// crash leaves the old record or the new one, never half of one. The DaemonSet mounts the host's
// /run/ipvs-operator so the record outlives the pod.
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';

/** Where the record is kept. */
export interface OwnershipRecord {
  /** The recorded keys; undefined when there is no record (first start, or after a reboot). */
  load(): Promise<Set<string> | undefined>;
  /** Replaces the record. */
  save(keys: ReadonlySet<string>): Promise<void>;
  /** Deletes the record (cleanup); a missing one is fine. */
  remove(): Promise<void>;
}

/** The default state directory: on the host's /run, like the kernel table it describes. */
export const DEFAULT_STATE_DIR = '/run/ipvs-operator';

/** The record's file in a state directory. */
export function recordPath(stateDir: string): string {
  return join(stateDir, 'owned-virtual-servers');
}

const HEADER = '# ipvs-operator: virtual servers it created or took over (one key a line); see plan/ownership.ts';

/** The record as a file. */
export class FileOwnershipRecord implements OwnershipRecord {
  constructor(readonly path: string) {}

  async load(): Promise<Set<string> | undefined> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw e;
    }
    return parseRecord(text);
  }

  async save(keys: ReadonlySet<string>): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true });
    const tmp = `${this.path}.tmp-${process.pid}`;
    await writeFile(tmp, formatRecord(keys));
    await rename(tmp, this.path);
  }

  async remove(): Promise<void> {
    await rm(this.path, { force: true });
  }
}

/**
 * The record in memory: for tests, and for dry runs, which read the node's record (`readFrom`)
 * once and keep their writes here.
 */
export class MemoryOwnershipRecord implements OwnershipRecord {
  keys: Set<string> | undefined;
  private pending: OwnershipRecord | undefined;
  constructor(initial?: Iterable<string>, readFrom?: OwnershipRecord) {
    this.keys = initial ? new Set(initial) : undefined;
    this.pending = readFrom;
  }
  async load(): Promise<Set<string> | undefined> {
    if (this.pending) {
      this.keys = await this.pending.load();
      this.pending = undefined;
    }
    return this.keys ? new Set(this.keys) : undefined;
  }
  async save(keys: ReadonlySet<string>): Promise<void> {
    this.keys = new Set(keys);
  }
  async remove(): Promise<void> {
    this.keys = undefined;
  }
}

/** The file's text: the header, then the keys sorted. */
export function formatRecord(keys: ReadonlySet<string>): string {
  return `${[HEADER, ...[...keys].sort()].join('\n')}\n`;
}

/** Keys from a record's text (comments and blank lines skipped). */
export function parseRecord(text: string): Set<string> {
  return new Set(text.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#')));
}
