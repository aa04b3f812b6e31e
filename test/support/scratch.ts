// Scratch directories for a test file: each is made under the OS's temporary directory and removed,
// with what the test wrote in it, once the file's tests have run (so `npm test` leaves no trace in /tmp).
import { afterAll } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made: string[] = [];

afterAll(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A new empty directory named `<prefix>XXXXXX`, removed after this file's tests. */
export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}
