// The fake API server of the unit and kernel tests is the lab cluster's API server
// (lab/cluster/apiserver.ts) with every lab behaviour off; the tests keep importing it from here.
export { FakeApiServer, type FakeApiServerOptions, type Fault, type RecordedRequest, type ResourceName, RESOURCES, clientFor } from '../../lab/cluster/apiserver.js';
