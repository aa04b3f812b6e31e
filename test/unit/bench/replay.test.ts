// The bench's replay input: recorded datagrams split back into the messages they carried, with
// the operator's own framing (a torn message or bytes left over are refused, not replayed).
import { describe, expect, it } from '@jest/globals';
import { splitMessages } from '../../../bench/replay.js';
import { cstring, encodeGenlMessage, encodeGetFamily, nla, u32 } from '../../../src/netlink/framing.js';

describe('splitMessages', () => {
  const a = encodeGetFamily('IPVS', 1, 0);
  const b = encodeGenlMessage(0x20, 0x5, 2, 0, 1, 1, [nla(1, cstring('x')), nla(2, u32(7))]);

  it('gives back each message of datagrams laid end to end, as views of the same bytes', () => {
    const buf = Buffer.concat([a, b, a]);
    const out = splitMessages(buf);
    expect(out.map((m) => [...m])).toEqual([[...a], [...b], [...a]]);
    expect(out[1]!.buffer).toBe(buf.buffer);
    expect(splitMessages(Buffer.alloc(0))).toEqual([]);
  });

  it('refuses a torn message and bytes left over', () => {
    expect(() => splitMessages(Buffer.concat([a, b]).subarray(0, a.length + b.length - 4))).toThrow(/length/);
    expect(() => splitMessages(Buffer.concat([a, Buffer.alloc(8)]))).toThrow(/trailing bytes/);
  });
});
