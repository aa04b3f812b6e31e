// The Kubernetes object types buildDesired reads, re-exported from @kubernetes/client-node as
// types only (`import type` is erased: nothing of client-node loads at runtime). The purity lint
// rule forbids the package by name without exempting type imports, hence the one exemption here.
// eslint-disable-next-line no-restricted-imports -- type-only import, erased at compile time
export type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
