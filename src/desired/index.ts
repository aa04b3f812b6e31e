// Desired IPVS state from Services and EndpointSlices. pure: no I/O.
export * from './types.js';
export { DesiredState, type SyncResult, buildDesired, formatSetEntry } from './state.js';
export { type BuildEnv, type ServiceEntry, SERVICE_PROXY_NAME_LABEL, buildServiceEntry, handlesService, serviceId } from './service.js';
export { SCHEDULER_ANNOTATION, SCHEDULER_OPTIONS_ANNOTATION } from './scheduler.js';
