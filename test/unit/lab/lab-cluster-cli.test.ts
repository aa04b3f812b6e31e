// `npm run cluster -- kubectl ...` on the host: which requests carry the host's stdin to the
// guest (lab/cluster/cli.ts wantsStdin). Only those that read it, so nothing waits on a stdin
// nobody writes.
import { describe, expect, it } from '@jest/globals';
import { wantsStdin } from '../../../lab/cluster/cli.js';

describe('the lab cluster\'s stdin forwarding', () => {
  it.each([
    [['kubectl', 'apply', '-f', '-'], true],
    [['kubectl', 'create', '--filename', '-'], true],
    [['kubectl', 'apply', '-f=-'], true],
    [['kubectl', 'replace', '--filename=-'], true],
    [['kubectl', 'exec', '-i', 'webpod-1', '--', 'cat'], true],
    [['kubectl', 'exec', '--stdin', 'webpod-1', '--', 'cat'], true],
    [['kubectl', 'apply', '-f', 'svc.yaml'], false],
    [['kubectl', 'get', 'pods'], false],
    [['kubectl', 'exec', 'webpod-1', '--', 'cat', '-i'], false], // after --: the pod's command's own flag
    [['exec', 'myk8s-worker', 'cat'], false],
    [['status'], false],
  ])('%j reads stdin: %s', (argv, want) => {
    expect(wantsStdin(argv)).toBe(want);
  });
});
