// ajv's class, loaded when a schema is first compiled at run time. The built-in plugins' and the
// IPVSProxyConfig's validators are compiled ahead of time (validators.gen.ts beside each), so a node compiles
// nothing unless a --plugins-dir plugin or a constructor's own plugin asks: importing ajv up front
// loaded 66 modules for nothing, seconds per process in the lab VM. ajv is CommonJS, so require()
// loads it synchronously where the compile is.
import { createRequire } from 'node:module';
import type { Ajv } from 'ajv';

const require = createRequire(import.meta.url);
let loaded: typeof Ajv | undefined;

/** ajv's Ajv class: the same object its ES module import gives (one module, loaded once). */
export function ajvClass(): typeof Ajv {
  loaded ??= (require('ajv') as typeof import('ajv')).Ajv;
  return loaded;
}
