// The planner: desired table + the kernel's table -> ops. pure: no I/O.
export {
  type DrainState, type Plan, type PlanInput, type WantedVirtualServer, planIpvs, planVirtualServer, planVirtualServers,
} from './plan.js';
export {
  type OwnershipInput, type Owns, type RecordChange, type RecordPlan, applyRecordPlan, makeOwnership, planRecord,
} from './ownership.js';
