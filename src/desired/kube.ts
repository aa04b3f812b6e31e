// The Kubernetes object types buildDesired reads, re-exported from @kubernetes/client-node as
// types only (`import type` is erased: nothing of client-node loads at runtime; the purity lint
// rule allows type-only imports and refuses any other).
export type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
