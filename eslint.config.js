import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// Pure modules (model, desired state, planner, codec, renderers, plugins) must not reach sockets,
// processes, the logger or client-node at runtime: the rule below keeps them pure.
const impure = ['netlink', 'node:child_process', 'child_process', 'node:net', 'net', 'node:dgram',
  'node:fs', 'fs', 'node:fs/promises', 'fs/promises', 'winston', '@kubernetes/client-node', 'node:http', 'http'];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.cache/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['src/model/**/*.ts', 'src/desired/**/*.ts', 'src/plan/**/*.ts', 'src/balance/**/*.ts', 'src/ipvs/attrs.ts', 'src/ipvs/decode.ts', 'src/ipvs/requests.ts', 'src/netlink/framing.ts', 'src/netlink/errors.ts', 'src/rtnl/errors.ts', 'src/rtnl/messages.ts',
      'src/conntrack/codec.ts', 'src/conntrack/constants.ts', 'src/conntrack/errors.ts',
      'src/ipvs/constants.ts', 'src/ipvs/validate.ts', 'src/ipvs/errors.ts', 'src/iptables/render.ts', 'src/iptables/drift.ts', 'src/iptables/ipset-save.ts', 'src/iptables/ipset-plan.ts',
      'src/iptables/save.ts', 'src/iptables/names.ts', 'src/iptables/kube-proxy-names.ts', 'src/healthcheck/health.ts', 'src/source/manifests.ts', 'src/source/file-entries.ts', 'src/source/files-parse.ts', 'src/source/config-gate.ts', 'src/source/dedup.ts', 'src/source/trim.ts',
      'src/config/schema.ts', 'src/config/types.ts', 'src/cli/explain.ts', 'src/kube/watch-events.ts', 'src/kube/cluster-view-steps.ts', 'lab/compare/{types,stats,kube-proxy,table,chart,manifests,flags}.ts', 'lab/cluster/{websocket,remotecommand}.ts',
      'plugins/**/*.ts'],
    rules: {
      // Type-only imports (e.g. client-node's V1Service) are erased at compile time: allowed.
      '@typescript-eslint/no-restricted-imports': ['error', {
        paths: impure.map((name) => ({ name, message: 'pure module: side effects live at the edges', allowTypeImports: true })),
        patterns: [{ group: ['**/ipvs/socket*', '**/ipvs/client*', '**/kube/*'], allowTypeImports: true,
          message: 'pure module: side effects live at the edges' }],
      }],
    },
  },
);
