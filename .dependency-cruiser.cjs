// The layer rules of src/ (README, Layout), checked by `npm run deps`. Type-only imports count:
// a cycle through `import type` still ties the layers together, and tsc does not see it.
/** @type {import('dependency-cruiser').IConfiguration} */

// What the workflow bundle may take: Temporal's deterministic sandbox runs it.
const WORKFLOW_SAFE = ['^src/domain/', '^src/shared/', '^src/workflows/', 'node_modules/@temporalio/workflow/'];

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'No import cycle in src/, type-only imports included.',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'workflows-stay-deterministic',
      severity: 'error',
      comment: 'Workflows take @temporalio/workflow, the domain, the shared contracts, other workflow files, and activity types only.',
      from: { path: '^src/workflows/' },
      to: { pathNot: [...WORKFLOW_SAFE, '^src/activities/'] },
    },
    {
      name: 'workflows-take-activity-types-only',
      severity: 'error',
      from: { path: '^src/workflows/' },
      to: { path: '^src/activities/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'shared-is-history-contract',
      severity: 'error',
      comment: 'src/shared is imported by workflows: @temporalio/workflow (and @temporalio/common), the domain and itself only.',
      from: { path: '^src/shared/' },
      to: { pathNot: ['^src/domain/', '^src/shared/', 'node_modules/@temporalio/(workflow|common)/'] },
    },
    {
      name: 'domain-is-pure',
      severity: 'error',
      comment: 'src/domain imports nothing outside src/domain, and no npm package.',
      from: { path: '^src/domain/' },
      to: { pathNot: ['^src/domain/'] },
    },
    {
      name: 'activities-over-ports',
      severity: 'error',
      comment: 'Activities take ports, never the Temporal client, the CLI or a concrete adapter: the worker wires those in.',
      from: { path: '^src/activities/' },
      to: { path: ['^src/client/', '^src/cli/', '^src/adapters/'], pathNot: ['^src/adapters/errors\\.ts$', '^src/adapters/[^/]+/port\\.ts$'] },
    },
    {
      name: 'activities-take-port-types-only',
      severity: 'error',
      // The one value an activity takes from a port is journalPath: where the journal lies beside the
      // live config is part of the router-deployment contract, and the activity checks it first.
      comment: 'From a port an activity takes types; values (errors) come from src/adapters/errors.ts.',
      from: { path: '^src/activities/' },
      to: { path: '^src/adapters/[^/]+/port\\.ts$', pathNot: '^src/adapters/router-deployment/port\\.ts$', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'ports-are-contracts',
      severity: 'error',
      comment: 'A port is an interface (and the pure contract helpers of it): no npm package, no node built-in, no adapter.',
      from: { path: '^src/adapters/[^/]+/port\\.ts$' },
      to: { pathNot: ['^src/domain/', '^src/shared/', '^src/adapters/errors\\.ts$', '^src/adapters/[^/]+/port\\.ts$'] },
    },
    {
      name: 'adapters-below-activities',
      severity: 'error',
      comment: 'Adapters implement ports; they do not reach up into activities, the CLI or the worker.',
      from: { path: '^src/adapters/' },
      to: { path: ['^src/activities/', '^src/cli/', '^src/worker/', '^src/client/'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'] },
  },
};
