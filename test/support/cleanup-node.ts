// What a test's operator left on the lab node, removed from the test's own process: the function
// `ipvs-operator cleanup` runs (src/cli/status.ts), with its defaults, without a node process per
// call. In the lab VM a process of its own cost 16-21 s, mostly node's start and its module loads
// (docs/testing.md); the tests that check the command itself still run it.
import { defaultProxyConfig } from '../../src/config/types.js';
import { DEFAULT_STATE_DIR, FileOwnershipRecord, recordPath } from '../../src/sync/record.js';
import { cleanup } from '../../src/cli/status.js';
import { iptablesPath } from '../../src/cli/wiring.js';

/** Removes the operator's virtual servers, VIP link, record, chains and sets; the lines it did. */
export async function cleanupNode(interfaceName = defaultProxyConfig.interfaceName, stateDir = DEFAULT_STATE_DIR): Promise<string[]> {
  return cleanup(interfaceName, await iptablesPath(), new FileOwnershipRecord(recordPath(stateDir)), stateDir);
}
