// Reads the CRDs shipped in crds/ (relative to the package root, wherever the compiled code runs
// from) so the operator validates with exactly the schema the cluster has. The pure part is
// src/config/schema.ts.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { type ConfigResult, ConfigValidator } from './schema.js';

/** The directory holding crds/: the nearest ancestor of this module that has crds/<file>. Throws when none has. */
export function crdsDir(file = 'ipvsproxyconfigs.yaml'): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'crds', file))) return join(dir, 'crds');
    const up = dirname(dir);
    if (up === dir) throw new Error(`crds/${file} not found above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
}

/** Every CRD the project ships in crds/, by plural. */
export const PROJECT_CRDS = ['ipvsproxyconfigs', 'ipvsnodestates', 'ipvsloadreports', 'ipvsserviceweights'] as const;

/** A CRD from crds/ by its plural, parsed. Throws when missing. */
export function readCrd(name: (typeof PROJECT_CRDS)[number]): unknown {
  const file = `${name}.yaml`;
  return parse(readFileSync(join(crdsDir(file), file), 'utf8'));
}

let validator: ConfigValidator | undefined;

/** The validator compiled from crds/ipvsproxyconfigs.yaml (read once). */
export function configValidator(): ConfigValidator {
  validator ??= new ConfigValidator(readCrd('ipvsproxyconfigs'));
  return validator;
}

/** Validates an IPVSProxyConfig object with the CRD's schema; see ConfigValidator.validate. */
export function validateConfig(obj: unknown): ConfigResult {
  return configValidator().validate(obj);
}
