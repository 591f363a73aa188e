// The SDK's process-wide workflow handlers (SDK 1.24: @temporalio/worker/lib/workflow/vm-shared's
// globalHandlers): the stack-trace promise hook and the source-mapping of workflow stacks, installed
// once per thread that runs workflows. Not exported by the SDK: looked up at run time, so that where
// an upgrade moves them the callers go on without (the replay with its costs, src/audit/replay-costs.ts;
// the workflow threads with the SDK's own hook, lazy-stack-traces.ts), and their tests fail.

/** A frame of a structured stack, as the SDK's `__enhanced_stack_trace` answers it. */
export interface StructuredFrame {
  file_path?: string;
  function_name?: string;
  line?: number;
  column?: number;
  internal_code: boolean;
}

export interface SdkWorkflowHandlers {
  installed: boolean;
  promiseHookInstalled: boolean;
  stopPromiseHook: () => void;
  /** Where the SDK's formatter leaves the structured frames of the stack it formatted last. */
  currentStackTrace?: StructuredFrame[];
  /** The bundles whose frames the SDK's formatter maps to their sources. */
  bundleFilenameToSourceMapConsumer: Map<string, unknown>;
  setPromiseHook(): void;
  overridePrepareStackTrace(): void;
}

/** This thread's handlers, when they are where and what SDK 1.24 keeps. */
export function sdkWorkflowHandlers(): SdkWorkflowHandlers | undefined {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- an SDK internal, looked up at run time so its absence is survivable
    const h = (require('@temporalio/worker/lib/workflow/vm-shared') as { globalHandlers?: Partial<SdkWorkflowHandlers> }).globalHandlers;
    return h &&
      typeof h.installed === 'boolean' &&
      typeof h.promiseHookInstalled === 'boolean' &&
      typeof h.setPromiseHook === 'function' &&
      typeof h.overridePrepareStackTrace === 'function' &&
      typeof h.stopPromiseHook === 'function' &&
      h.bundleFilenameToSourceMapConsumer instanceof Map
      ? (h as SdkWorkflowHandlers)
      : undefined;
  } catch {
    return undefined;
  }
}
