// The workflow code a worker runs and a replay checks, in one place: the workflows and the
// interceptor modules bundled with them. A replay that bundled the workflows without the
// interceptors would not see the commands they add, and would fail histories a worker wrote.
import type { BundleOptions, InjectedSinks } from '@temporalio/worker';
import type { OperationSinks } from '../shared/operation-metrics';
import type { UpdateAnswerSinks } from '../shared/update-answers';

export const WORKFLOWS_PATH = require.resolve('../workflows');
export const WORKFLOW_INTERCEPTOR_MODULES: string[] = [require.resolve('../workflows/interceptors')];

/**
 * The bundle's inline source map maps lines only and carries no sources' text: stack traces (a
 * failure's, the UI's) still name the TypeScript file and line. The SDK keeps the bundle's text in
 * both isolates and the map parsed in its workflow thread for the worker's life; the full map made
 * the bundle 2.3 MB around 0.7 MB of code (bench/worker-rss, as installed: 157-161 -> 145 MiB
 * idle, 200-208 -> 182 MiB after the storm).
 */
export const BUNDLE_DEVTOOL = 'inline-nosources-cheap-module-source-map';
export const withLeanSourceMap: NonNullable<BundleOptions['webpackConfigHook']> = (config) => ({ ...config, devtool: BUNDLE_DEVTOOL });

/** bundleWorkflowCode's options for the worker's own workflows. */
export function workflowCodeOptions(logger?: BundleOptions['logger']): BundleOptions {
  return {
    workflowsPath: WORKFLOWS_PATH,
    workflowInterceptorModules: WORKFLOW_INTERCEPTOR_MODULES,
    webpackConfigHook: withLeanSourceMap,
    ...(logger ? { logger } : {}),
  };
}

/**
 * Update answers go nowhere on a live worker: history holds them already. Only an audit's replay
 * (src/audit/replay.ts) takes them, to hold against the recorded ones.
 */
export const UNHELD_UPDATE_ANSWERS: InjectedSinks<UpdateAnswerSinks> = { updateAnswers: { replayed: { fn: () => undefined, callDuringReplay: false } } };

/**
 * The sinks the workflows call (src/shared/operation-metrics.ts, src/shared/update-answers.ts),
 * counting and holding nothing: for a replay that checks only commands, or a worker nothing
 * scrapes. A sink a workflow names must exist, or the worker logs each call as an error.
 */
export const UNCOUNTED_SINKS: InjectedSinks<OperationSinks & UpdateAnswerSinks> = { operations: { ended: { fn: () => undefined } }, ...UNHELD_UPDATE_ANSWERS };
