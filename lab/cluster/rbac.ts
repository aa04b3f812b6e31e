// Authentication and authorization of the lab API server, pure: a static token file (the
// kube-apiserver --token-auth-file CSV format) and RBAC from ClusterRoles and ClusterRoleBindings
// (manifests/clusterrole.yaml, manifests/clusterrolebinding.yaml).
//
// Kept from the real server: the group `system:masters` may do anything; a ServiceAccount token's
// user is `system:serviceaccount:<ns>:<name>` with the groups `system:serviceaccounts`,
// `system:serviceaccounts:<ns>`, `system:authenticated`; a subresource is authorized as
// `<resource>/<sub>`; resourceNames restrict get/update/patch/delete, and list/watch only with a
// `metadata.name=` field selector; non-resource URLs (discovery, /version) are open to every
// authenticated user, as the default `system:discovery` role makes them.
// Approximated: only cluster-wide roles and bindings (Role/RoleBinding documents are ignored),
// no aggregation, no impersonation.
import { parseAllDocuments } from 'yaml';

/** An RBAC PolicyRule as in a ClusterRole. */
export interface PolicyRule { apiGroups?: string[]; resources?: string[]; verbs: string[]; resourceNames?: string[]; nonResourceURLs?: string[] }

/** An authenticated user. */
export interface UserInfo { name: string; groups: string[] }

/** ClusterRoles (by name) and their bindings to subjects. */
export interface RbacPolicy {
  roles: Map<string, PolicyRule[]>;
  bindings: Array<{ role: string; subjects: Array<{ kind: string; name: string; namespace?: string }> }>;
}

/** What a request asks to do, as the real authorizer names it. */
export interface RequestAttributes { verb: string; group: string; resource: string; subresource?: string; namespace?: string; name?: string }

/** Parses a token file: lines `token,user,uid[,"group1,group2"]`; blank and `#` lines skipped; throws on a malformed line. */
export function parseTokenFile(text: string): Map<string, UserInfo> {
  const out = new Map<string, UserInfo>();
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const m = /^([^,]+),([^,]+),([^,]*)(?:,"?([^"]*)"?)?$/.exec(line);
    if (!m) throw new Error(`token file line ${i + 1}: expected token,user,uid[,"groups"]`);
    out.set(m[1]!, { name: m[2]!, groups: m[4] ? m[4].split(',').map((g) => g.trim()).filter(Boolean) : [] });
  });
  return out;
}

/** The user a token file entry becomes: ServiceAccount users get their groups; everyone is system:authenticated. */
export function userGroups(user: UserInfo): UserInfo {
  const sa = /^system:serviceaccount:([^:]+):[^:]+$/.exec(user.name);
  const extra = sa ? ['system:serviceaccounts', `system:serviceaccounts:${sa[1]}`] : [];
  return { name: user.name, groups: [...new Set([...user.groups, ...extra, 'system:authenticated'])] };
}

/** Reads ClusterRoles and ClusterRoleBindings from YAML texts (several documents each); other kinds are skipped. */
export function parseRbac(yamlTexts: readonly string[]): RbacPolicy {
  const policy: RbacPolicy = { roles: new Map(), bindings: [] };
  for (const text of yamlTexts) {
    for (const d of parseAllDocuments(text)) {
      if (d.errors.length) throw new Error(`RBAC YAML: ${d.errors[0]!.message}`);
      const o = d.toJS() as { kind?: string; metadata?: { name?: string }; rules?: PolicyRule[]; roleRef?: { kind?: string; name?: string }; subjects?: RbacPolicy['bindings'][0]['subjects'] } | null;
      if (o?.kind === 'ClusterRole' && o.metadata?.name) policy.roles.set(o.metadata.name, o.rules ?? []);
      if (o?.kind === 'ClusterRoleBinding' && o.roleRef?.kind === 'ClusterRole' && o.roleRef.name) {
        policy.bindings.push({ role: o.roleRef.name, subjects: o.subjects ?? [] });
      }
    }
  }
  return policy;
}

/** The static policy with the ClusterRoles and ClusterRoleBindings created through the API added (stored objects, any order). */
export function withStored(staticPolicy: RbacPolicy, stored: readonly object[]): RbacPolicy {
  if (!stored.length) return staticPolicy;
  const dynamic = parseRbac([stored.map((o) => JSON.stringify(o)).join('\n---\n')]);
  return { roles: new Map([...staticPolicy.roles, ...dynamic.roles]), bindings: [...staticPolicy.bindings, ...dynamic.bindings] };
}

/** Whether one rule allows the request. */
export function ruleAllows(r: PolicyRule, a: RequestAttributes): boolean {
  const resource = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const names = r.resourceNames ?? [];
  return has(r.apiGroups, a.group) && has(r.resources, resource) && has(r.verbs, a.verb) &&
    (names.length === 0 || (a.name !== undefined && names.includes(a.name)));
}

/** Whether `user` may do `a` under `policy` (system:masters may do anything). */
export function authorize(policy: RbacPolicy, user: UserInfo, a: RequestAttributes): boolean {
  if (user.groups.includes('system:masters')) return true;
  for (const b of policy.bindings) {
    if (!b.subjects.some((s) => subjectIs(s, user))) continue;
    if ((policy.roles.get(b.role) ?? []).some((r) => ruleAllows(r, a))) return true;
  }
  return false;
}

/** The real server's 403 message for a request. */
export function forbiddenMessage(user: UserInfo, a: RequestAttributes): string {
  const res = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const what = a.name ? `${a.resource} "${a.name}"` : a.resource;
  const where = a.namespace ? ` in the namespace "${a.namespace}"` : ' at the cluster scope';
  return `${what} is forbidden: User "${user.name}" cannot ${a.verb} resource "${res}" in API group "${a.group}"${where}`;
}

function has(list: string[] | undefined, v: string): boolean {
  return !!list && (list.includes(v) || list.includes('*'));
}

function subjectIs(s: { kind: string; name: string; namespace?: string }, user: UserInfo): boolean {
  if (s.kind === 'ServiceAccount') return user.name === `system:serviceaccount:${s.namespace ?? ''}:${s.name}`;
  if (s.kind === 'User') return user.name === s.name;
  if (s.kind === 'Group') return user.groups.includes(s.name);
  return false;
}
