// The lab's kernel from another Debian suite (lab/host.ts, LAB_KERNEL_SUITE) and the initramfs's
// modules as such suites ship them, compressed (lab/initramfs.ts).
import { describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { kernelSuite, LabSetupError, suiteAptOptions } from '../../../lab/host.js';
import { moduleName, plainModule } from '../../../lab/initramfs.js';

describe('LAB_KERNEL_SUITE', () => {
  it('names a suite, or nothing for the host\'s own lists', () => {
    expect(kernelSuite({ LAB_KERNEL_SUITE: 'trixie' })).toBe('trixie');
    expect(kernelSuite({ LAB_KERNEL_SUITE: ' bookworm-backports ' })).toBe('bookworm-backports');
    expect(kernelSuite({})).toBeUndefined();
    expect(kernelSuite({ LAB_KERNEL_SUITE: '' })).toBeUndefined();
  });

  it('refuses what is not a suite name, before any apt call', () => {
    for (const bad of ['trixie main', '../etc', 'Trixie', 'x', 'trixie;rm', 'a'.repeat(40)]) {
      expect(() => kernelSuite({ LAB_KERNEL_SUITE: bad })).toThrow(LabSetupError);
    }
  });

  it('keeps the suite\'s lists in its own directory and reads none of the host\'s sources', () => {
    const opts = suiteAptOptions('trixie', '/c/apt-trixie');
    const values = opts.filter((_, i) => i % 2 === 1);
    expect(opts.filter((_, i) => i % 2 === 0).every((o) => o === '-o')).toBe(true);
    expect(values).toEqual([
      'Dir::Etc::SourceList=/dev/null', 'Dir::Etc::SourceParts=/c/apt-trixie/sources',
      'Dir::State::Lists=/c/apt-trixie/lists', 'Dir::Cache=/c/apt-trixie/cache', 'Dir::State::status=/dev/null',
    ]);
  });
});

describe('initramfs modules as a suite ships them', () => {
  it('names a module without .ko and its compression', () => {
    expect(moduleName('/k/lib/modules/6.12/kernel/fs/9p/9p.ko.xz')).toBe('9p');
    expect(moduleName('/k/lib/modules/6.1/kernel/drivers/virtio/virtio_pci.ko')).toBe('virtio_pci');
    expect(moduleName('/k/x/overlay.ko.zst')).toBe('overlay');
  });

  it('gives a compressed module\'s bytes plain, and a plain one as it is', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lab-mod-'));
    try {
      const bytes = Buffer.from(Array.from({ length: 5000 }, (_, i) => (i * 31) % 251));
      writeFileSync(join(dir, 'm.ko'), bytes);
      expect(await plainModule(join(dir, 'm.ko'))).toEqual(bytes);
      const xz = spawnSync('xz', ['-k', join(dir, 'm.ko')]);
      expect(xz.status).toBe(0);
      expect(await plainModule(join(dir, 'm.ko.xz'))).toEqual(bytes);
      writeFileSync(join(dir, 'n.ko.lz4'), bytes);
      await expect(plainModule(join(dir, 'n.ko.lz4'))).rejects.toThrow(/no way to decompress \.lz4/);
      writeFileSync(join(dir, 'bad.ko.xz'), 'not xz');
      await expect(plainModule(join(dir, 'bad.ko.xz'))).rejects.toThrow(/xz -dc/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
