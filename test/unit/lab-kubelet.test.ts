// The lab kubelet's pure parts: the crash-loop back-off of restartPolicy Always (backoff.ts) and
// the pod log files' layout and the pods/log query (podlog.ts). Times are ms from 0; a container
// "runs" from its restart to its exit.
import { describe, expect, it } from '@jest/globals';
import { type BackoffEntry, KUBELET_BACKOFF, formatBackoff, planRestart } from '../../lab/cluster/backoff.js';
import { parseLogQuery, podLogPath, selectLog } from '../../lab/cluster/podlog.js';

/** The delays of successive exits, each after the container ran `ranMs` since its (re)start. */
function delays(ranMs: readonly number[], policy = KUBELET_BACKOFF): number[] {
  let entry: BackoffEntry | undefined;
  let t = 0; // when the current run started
  return ranMs.map((ran) => {
    const d = planRestart(entry, t + ran, policy);
    entry = d.entry;
    t = t + ran + d.delayMs;
    expect(entry.restartedAt).toBe(t);
    return d.delayMs;
  });
}

describe('lab kubelet: crash-loop back-off (the kubelet\'s flowcontrol.Backoff as doBackOff uses it)', () => {
  it('restarts at once after the first exit, then 10 s doubling to the 5 min cap', () => {
    expect(delays(Array(9).fill(1000)).map((ms) => ms / 1000)).toEqual([0, 10, 20, 40, 80, 160, 300, 300, 300]);
  });

  it('starts over once a run lasted more than 10 min (2 x the cap), and not at exactly 10 min', () => {
    expect(delays([1000, 1000, 1000, 600_001, 1000]).map((ms) => ms / 1000)).toEqual([0, 10, 20, 0, 10]);
    expect(delays([1000, 1000, 600_000]).map((ms) => ms / 1000)).toEqual([0, 10, 20]);
  });

  it('follows a stated shorter policy the same way', () => {
    expect(delays([1, 1, 1, 1, 3001, 1], { initialMs: 500, maxMs: 1500, resetMs: 3000 })).toEqual([0, 500, 1000, 1500, 0, 500]);
  });

  it('writes the delay as the CrashLoopBackOff message does', () => {
    expect([10_000, 160_000, 300_000, 500].map(formatBackoff)).toEqual(['10s', '2m40s', '5m0s', '500ms']);
  });
});

describe('lab kubelet: pod logs', () => {
  it('keeps one file per run of a container, under the pod\'s namespace, name and UID', () => {
    expect(podLogPath('/run/x', { namespace: 'ns', name: 'p', uid: 'u-1' }, 'c', 2)).toBe('/run/x/ns_p_u-1/c/2.log');
  });

  it.each([
    ['everything', {}, 'a\nb\nc\n'],
    ['the last two lines', { tailLines: 2 }, 'b\nc\n'],
    ['more lines than there are', { tailLines: 10 }, 'a\nb\nc\n'],
    ['no line', { tailLines: 0 }, ''],
    ['the first bytes', { limitBytes: 3 }, 'a\nb'],
    ['the last two lines, then 3 bytes of them', { tailLines: 2, limitBytes: 3 }, 'b\nc'],
  ])('selects %s', (_, q, want) => {
    expect(selectLog('a\nb\nc\n', q)).toBe(want);
  });

  it('a last line without a newline is a line too', () => {
    expect(selectLog('a\nb\nc', { tailLines: 2 })).toBe('b\nc');
  });

  it('reads kubectl\'s query and refuses a bad number', () => {
    expect(parseLogQuery(new URLSearchParams('container=c&tailLines=5&previous=true'))).toEqual({ container: 'c', tailLines: 5, previous: true });
    expect(parseLogQuery(new URLSearchParams(''))).toEqual({ previous: false });
    expect(() => parseLogQuery(new URLSearchParams('tailLines=-1'))).toThrow(/tailLines/);
    expect(() => parseLogQuery(new URLSearchParams('limitBytes=0'))).toThrow(/limitBytes/);
  });
});
