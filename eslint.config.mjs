// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';

// Workflow code is bundled into Temporal's deterministic sandbox: node built-ins and the
// non-workflow SDK packages would either fail the bundle or break replay, so forbid them here
// rather than at worker start-up.
const forbiddenInWorkflows = [
  ...builtinModules,
  ...builtinModules.map((m) => `node:${m}`),
  '@temporalio/activity',
  '@temporalio/client',
  '@temporalio/worker',
  'dockerode',
];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // node:test's test()/describe() return promises the runner itself awaits.
      '@typescript-eslint/no-floating-promises': ['error', { allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'describe', 'it', 'before', 'after'] }] }],
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
    },
  },
  {
    // src/shared/ is history contract the workflow bundle imports: the same rules hold there.
    files: ['src/workflows/**/*.ts', 'src/domain/**/*.ts', 'src/shared/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { paths: forbiddenInWorkflows.map((name) => ({ name, message: 'not allowed in code the workflow bundle takes' })) }],
    },
  },
);
