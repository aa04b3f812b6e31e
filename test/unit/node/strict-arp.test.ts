// strictARP (src/node/arp.ts): the plan as a table, and the edge against a directory standing
// in for /proc/sys/net/ipv4/conf/all with a real state directory. The kernel's ARP behaviour
// itself is checked in the lab VM (test/kernel/strict-arp.test.ts).
import { describe, expect, it } from '@jest/globals';
import { readFileSync, existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type ArpSettings, applyStrictArp, planStrictArp, savedArpPath } from '../../../src/node/arp.js';
import { scratchDir } from '../../support/scratch.js';

const s = (arpIgnore: string, arpAnnounce: string): ArpSettings => ({ arpIgnore, arpAnnounce });

describe('planStrictArp', () => {
  it.each([
    ['on, from the defaults: save them, write 1/2', true, s('0', '0'), undefined,
      { save: s('0', '0'), write: s('1', '2'), dropSaved: false, note: 'strictARP on: arp_ignore=1 arp_announce=2 (was arp_ignore=0 arp_announce=0)' }],
    ['on, already 1/2 on the node: nothing (nothing to restore later)', true, s('1', '2'), undefined, { dropSaved: false }],
    ['on, set and saved before (a restart): nothing', true, s('1', '2'), s('0', '1'), { dropSaved: false }],
    ['on, set before but changed since: the first saved values stay', true, s('0', '0'), s('0', '1'),
      { save: s('0', '1'), write: s('1', '2'), dropSaved: false, note: 'strictARP on: arp_ignore=1 arp_announce=2 (was arp_ignore=0 arp_announce=0)' }],
    ['off, never turned on: nothing', false, s('0', '0'), undefined, { dropSaved: false }],
    ['off after on: the saved values restored', false, s('1', '2'), s('0', '1'),
      { write: s('0', '1'), dropSaved: true, note: 'strictARP off: arp_ignore=0 arp_announce=1 restored' }],
    ['off, changed by someone since: left alone, saved dropped', false, s('2', '2'), s('0', '0'),
      { dropSaved: true, note: 'strictARP off: arp_ignore=2 arp_announce=2 was changed by someone else since it was set; left as it is' }],
  ] as const)('%s', (_name, strict, current, saved, plan) => {
    expect(planStrictArp(strict, current, saved)).toEqual(plan);
  });
});

describe('applyStrictArp', () => {
  it('turns on, survives a restart, turns off to the values the node had, and cleans its state', async () => {
    const sys = scratchDir('arp-sys-');
    const state = join(scratchDir('arp-state-'), 'run');
    const set = (i: string, a: string) => { writeFileSync(join(sys, 'arp_ignore'), `${i}\n`); writeFileSync(join(sys, 'arp_announce'), `${a}\n`); };
    const get = () => `${readFileSync(join(sys, 'arp_ignore'), 'utf8').trim()}/${readFileSync(join(sys, 'arp_announce'), 'utf8').trim()}`;
    set('0', '1');
    expect(await applyStrictArp(true, state, sys)).toMatch(/^strictARP on/);
    expect(get()).toBe('1/2');
    expect(readFileSync(savedArpPath(state), 'utf8')).toBe('arp_ignore=0 arp_announce=1\n');
    expect(await applyStrictArp(true, state, sys)).toBeUndefined(); // a restart with it on
    expect(await applyStrictArp(false, state, sys)).toBe('strictARP off: arp_ignore=0 arp_announce=1 restored');
    expect(get()).toBe('0/1');
    expect(existsSync(savedArpPath(state))).toBe(false);
    expect(await applyStrictArp(false, state, sys)).toBeUndefined();
  });

  it('a malformed saved file is no saved values; an unreadable sysctl throws (the caller logs it)', async () => {
    const sys = scratchDir('arp-sys-');
    const state = scratchDir('arp-state-');
    writeFileSync(savedArpPath(state), 'garbage');
    await expect(applyStrictArp(false, state, sys)).rejects.toThrow(/arp_ignore/);
    writeFileSync(join(sys, 'arp_ignore'), '1');
    writeFileSync(join(sys, 'arp_announce'), '2');
    expect(await applyStrictArp(false, state, sys)).toBeUndefined();
  });
});
