// The config's validator, from the CRD shipped in crds/ (read by crds.ts) so the operator validates
// with exactly the schema the cluster has. The pure part is src/config/schema.ts.
import type { ValidateFunction } from 'ajv';
import { readCrd } from './crds.js';
import { type ConfigResult, ConfigValidator } from './schema.js';
import { ipvsproxyconfigs } from './validators.gen.js';

export { PROJECT_CRDS, crdsDir, readCrd } from './crds.js';

let validator: ConfigValidator | undefined;

/**
 * The validator of crds/ipvsproxyconfigs.yaml (read once), compiled ahead of time from that file
 * (validators.gen.ts; a unit test fails when it is stale): ajv took 120 ms on the host, seconds
 * under qemu TCG, at every node's start.
 */
export function configValidator(): ConfigValidator {
  validator ??= new ConfigValidator(readCrd('ipvsproxyconfigs'), ipvsproxyconfigs as unknown as ValidateFunction);
  return validator;
}

/** Validates an IPVSProxyConfig object with the CRD's schema; see ConfigValidator.validate. */
export function validateConfig(obj: unknown): ConfigResult {
  return configValidator().validate(obj);
}
