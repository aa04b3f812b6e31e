// The built-in scheduler plugins, and how every plugin's options schema is compiled: apart from the
// registry (index.ts) so that lab/gen-validators.ts, which writes validators.gen.ts from them, does
// not load the file it writes. pure: no I/O.
import { plugin as dh } from './dh.js';
import { plugin as fo } from './fo.js';
import { plugin as lblc } from './lblc.js';
import { plugin as lblcr } from './lblcr.js';
import { plugin as lc } from './lc.js';
import { plugin as mh } from './mh.js';
import { plugin as nq } from './nq.js';
import { plugin as ovf } from './ovf.js';
import { plugin as rr } from './rr.js';
import { plugin as sed } from './sed.js';
import { plugin as sh } from './sh.js';
import { plugin as twos } from './twos.js';
import { plugin as wlc } from './wlc.js';
import { plugin as wrr } from './wrr.js';
import type { SchedulerPlugin } from './types.js';

/** Every built-in scheduler plugin. */
export const builtinPlugins: readonly SchedulerPlugin[] = [
  rr, wrr, lc, wlc, sed, nq, sh, dh, mh, lblc, lblcr, fo, ovf, twos,
];

/** How every options schema is compiled (the registry, and the built-ins' ahead of time). */
export const AJV_OPTIONS = Object.freeze(
  { allErrors: true, useDefaults: true, strict: true, strictRequired: false, verbose: true } as const);
