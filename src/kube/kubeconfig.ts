// Where the operator's KubeConfig comes from.
import { KubeConfig } from '@kubernetes/client-node';

/**
 * A KubeConfig from `path` (--kubeconfig) when given; else the in-cluster service account when
 * running in a pod; else the default ($KUBECONFIG, ~/.kube/config). Throws when the file is unreadable.
 */
export function loadKubeConfig(path?: string): KubeConfig {
  const kc = new KubeConfig();
  if (path) kc.loadFromFile(path);
  else if (process.env.KUBERNETES_SERVICE_HOST) kc.loadFromCluster();
  else kc.loadFromDefault();
  return kc;
}
