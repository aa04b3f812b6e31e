// A Deployment manifest for the lab's workload tests (the unit test with Debian's kubectl and the
// cluster scenario): `name` with `replicas` pods labelled app=<name>, one container.

/** A Deployment of `name` in default, the pod spec's lines given as YAML flow text. */
export function deploymentYaml(name: string, replicas: number, podSpec: string): string {
  return `apiVersion: apps/v1
kind: Deployment
metadata: {name: ${name}, namespace: default}
spec:
  replicas: ${replicas}
  selector: {matchLabels: {app: ${name}}}
  template:
    metadata: {labels: {app: ${name}}}
    spec: ${podSpec}
`;
}
