// In the SDK's workflow threads (SDK 1.24): where each pending promise of a workflow was made,
// recorded as the SDK records it for the `__stack_trace` and `__enhanced_stack_trace` queries (the
// UI's "Stack Trace" tab), formatted when a query asks instead of when the promise is made.
//
// The SDK's own hook formats every promise's stack at its creation: a stack trace, each frame
// mapped through the bundle's source map, the lines built and cut. That was a fifth of a workflow
// activation's CPU here (docs/performance.md, A task's time outside its local steps) for a query an
// operator makes rarely. This hook keeps the frames V8 captured (its call sites) and formats them
// with the SDK's own formatter on first read, so the queries answer the same stacks
// (test/lazy-stack-traces.test.ts compares them with the SDK's hook's answers), but for one thing:
// V8 reads a frame's function and method names from its call site when it is formatted, so a
// function renamed, or a method moved to another property, between a promise's creation and the
// query reads under its new name (a workflow that does either is rare; the frame's file and line
// are as before).
//
// What the SDK decides at creation is kept at creation: a promise that Promise.race or all makes
// for each of its members is linked to the aggregate's (the SDK reads that from the two top lines
// of the formatted stack). Those lines are builtins' (`Promise.then (<anonymous>)`), which the SDK
// prints as V8 does and never maps or cuts, so they are read from the call sites directly; where
// the two top frames could be anything else that decides (an aggregator, a frame the SDK drops),
// the stack is formatted at once, as the SDK would.
//
// Reached through the SDK's internals, for the pinned version in package.json; where they are not
// as expected, nothing is replaced and the SDK's hook runs (the thread's report says why).
import v8 from 'node:v8';
import { cutoffStackTrace } from '@temporalio/common';
import { sdkWorkflowHandlers } from './sdk-workflow-handlers';
import type { SdkWorkflowHandlers as SdkHandlers, StructuredFrame } from './sdk-workflow-handlers';

interface StackTrace {
  formatted: string;
  structured: StructuredFrame[];
}

type PendingPromise = Promise<unknown> & { runId?: string };

interface PromiseStackStore {
  promiseToStack: Map<PendingPromise, StackTrace>;
  childToParent: Map<PendingPromise, Set<PendingPromise>>;
}

interface Activator {
  promiseStackStore: PromiseStackStore;
  info: { runId: string };
}

type PrepareStackTrace = (err: Error, sites: NodeJS.CallSite[]) => unknown;

/** The two top lines the SDK links an aggregator's member promises by (vm-shared's init hook). */
const THEN = /^Promise\.then \(<anonymous>\)$/;
const AGGREGATOR = /^(Function|Promise)\.(race|all|allSettled|any) \(<anonymous>\)$/;
const LINKED_MEMBER = /^\s+at\sPromise\.then \(<anonymous>\)\n\s+at (Function|Promise)\.(race|all|allSettled|any) \(<anonymous>\)\n/;
const STARTS_AGGREGATE = /^\s+at (Function|Promise)\.(race|all|allSettled|any) \(<anonymous>\)\n/;
/** The hook's own frame, and node's promise-hook dispatcher under it, which no stack shows. */
const HOOK_FRAMES = /^Error\n\s*at [^\n]+\n(\s*at initAll \(node:internal\/promise_hooks:\d+:\d+\)\n)?/;

/** A realm's globals as a workflow promise reaches them (the SDK's getActivator does the same per call). */
interface Realm {
  activator(): Activator | undefined;
  error(): ErrorConstructor;
}

const realms = new WeakMap<object, Realm>();

/**
 * The realm a promise was made in: its workflow's context, where the current activator is a
 * global. The functions are made once a realm (the SDK compiles two a promise); they read the
 * globals on each call, since a reused context switches activator between workflows.
 */
function realmOf(promise: PendingPromise): Realm {
  const fn = promise.constructor.constructor as FunctionConstructor;
  let realm = realms.get(fn);
  if (!realm) {
    realm = {
      activator: fn('return globalThis.__TEMPORAL_ACTIVATOR__') as () => Activator | undefined,
      error: fn('return globalThis.Error') as () => ErrorConstructor,
    };
    realms.set(fn, realm);
  }
  return realm;
}

/** The SDK's cut of a structured stack: the hook's frames off the top, the SDK's own frames off the bottom. */
function cutStructured(frames: StructuredFrame[]): void {
  frames.shift();
  if (frames[0]?.function_name === 'initAll' && frames[0].file_path === 'node:internal/promise_hooks') frames.shift();
  const end = frames.findIndex(
    ({ function_name: name, file_path: file }) =>
      !!name &&
      !!file &&
      ((/^Activator\.\S+NextHandler$/.test(name) && /.*[\\/]workflow[\\/](?:src|lib)[\\/]internals\.[jt]s$/.test(file)) ||
        (/Script\.runInContext/.test(name) && /^node:vm|vm\.js$/.test(file))),
  );
  if (end > -1) frames.splice(end);
}

/** A stack formatted by the SDK's formatter (source-mapped, its structured frames beside it), cut as the SDK cuts it. */
function formatStack(handlers: SdkHandlers, prepare: PrepareStackTrace, err: Error, sites: NodeJS.CallSite[]): StackTrace {
  handlers.currentStackTrace = undefined;
  const text = prepare(err, sites) as string;
  const structured = handlers.currentStackTrace ?? [];
  handlers.currentStackTrace = undefined;
  cutStructured(structured);
  return { formatted: cutoffStackTrace(text.replace(HOOK_FRAMES, '')), structured };
}

/** A stack whose two fields are formatted on first read, then kept as plain data. */
function lazyStack(format: () => StackTrace): StackTrace {
  const stack = {} as StackTrace;
  const settle = (): StackTrace => {
    const done = format();
    Object.defineProperties(stack, {
      formatted: { value: done.formatted, enumerable: true, writable: true, configurable: true },
      structured: { value: done.structured, enumerable: true, writable: true, configurable: true },
    });
    return done;
  };
  Object.defineProperties(stack, {
    formatted: { get: () => settle().formatted, enumerable: true, configurable: true },
    structured: { get: () => settle().structured, enumerable: true, configurable: true },
  });
  return stack;
}

/**
 * A frame's line where the SDK prints it as V8 does (no source map for its file: a builtin's
 * `Promise.then (<anonymous>)`, node's own files); undefined where it prints the frame mapped
 * (`name (source:line:column)`), which never reads as a builtin's.
 */
function unmappedLine(handlers: SdkHandlers, site: NodeJS.CallSite | undefined): string | undefined {
  if (!site) return undefined;
  const file = site.getFileName();
  const mapped = !!file && handlers.bundleFilenameToSourceMapConsumer.has(file) && !!site.getLineNumber() && !!site.getColumnNumber();
  return mapped ? undefined : (site as NodeJS.CallSite & { toString(): string }).toString();
}

/**
 * Whether the SDK's linking could do anything but forget the aggregate under way, read from the
 * frames under the hook's: only a stack whose first line is an aggregator's, or whose first is a
 * builtin `then` while an aggregate is under way, can link or start one. Anything the call sites
 * cannot say for sure is formatted.
 */
function mayLink(handlers: SdkHandlers, sites: NodeJS.CallSite[], aggregateUnderWay: boolean): boolean {
  let top = 1;
  if (sites[top]?.getFunctionName() === 'initAll' && sites[top]?.getFileName() === 'node:internal/promise_hooks') top++;
  if (!sites[top] || !sites[top + 1]) return true;
  const first = unmappedLine(handlers, sites[top]);
  if (first === undefined) return false;
  if (AGGREGATOR.test(first)) return true;
  if (!THEN.test(first) || !aggregateUnderWay) return false;
  // A mapped second frame could be one the SDK drops, and the third line then decides.
  const second = unmappedLine(handlers, sites[top + 1]);
  return second === undefined || AGGREGATOR.test(second);
}

/** What a workflow thread says of its stack-trace hook once the SDK has installed its handlers. */
export type ThreadReport = { installed: true } | { installed: false; why: string };

/**
 * Replaces the SDK's promise hook in this workflow thread before the SDK installs it; `report`
 * hears, once the SDK installs its handlers (as the thread takes its bundle), which hook runs. The
 * SDK's own runs where its internals are not as SDK 1.24 keeps them, and is reported with why.
 */
export function installLazyStackTraces(report: (r: ThreadReport) => void): void {
  const handlers = sdkWorkflowHandlers();
  if (!handlers || handlers.installed) {
    report({ installed: false, why: "the SDK's workflow handlers (vm-shared globalHandlers) are not where and as SDK 1.24 keeps them" });
    return;
  }
  const sdkSetPromiseHook = handlers.setPromiseHook.bind(handlers);
  handlers.setPromiseHook = function setLazyPromiseHook(this: SdkHandlers) {
    // Called by the SDK's install(), after its overridePrepareStackTrace.
    // eslint-disable-next-line @typescript-eslint/unbound-method -- V8 calls it unbound too (the SDK's is an arrow function)
    const prepare = Error.prepareStackTrace as PrepareStackTrace | undefined;
    if (typeof prepare !== 'function') {
      sdkSetPromiseHook();
      report({ installed: false, why: "the SDK's stack formatter (Error.prepareStackTrace) was not installed before its hook" });
      return;
    }
    let rawSites = false;
    // While a promise's frames are taken, the formatter hands back V8's call sites as they are.
    Error.prepareStackTrace = (err, sites) => (rawSites ? sites : prepare(err, sites));
    let aggregate: PendingPromise | undefined;
    this.stopPromiseHook = v8.promiseHooks.createHook({
      init: (made, parentMade) => {
        let promise = made as PendingPromise;
        const parent = parentMade as PendingPromise | undefined;
        const realm = realmOf(promise);
        const activator = realm.activator();
        if (!activator) return;
        const store = activator.promiseStackStore;
        promise.runId = activator.info.runId;
        const ErrorCtor = realm.error();
        rawSites = true;
        let err: Error;
        let sites: unknown;
        try {
          err = new ErrorCtor();
          sites = err.stack;
        } finally {
          rawSites = false;
        }
        // Not formatted by the SDK's formatter: the SDK's hook records nothing then either.
        if (!Array.isArray(sites)) return;
        const frames = sites as NodeJS.CallSite[];
        let stackTrace: StackTrace;
        if (mayLink(this, frames, aggregate !== undefined)) {
          stackTrace = formatStack(this, prepare, err, frames);
          if (aggregate && LINKED_MEMBER.test(stackTrace.formatted)) {
            // An aggregator's promise for one of its members: recorded as the aggregate.
            promise = aggregate;
            stackTrace = store.promiseToStack.get(aggregate) as StackTrace;
          } else if (STARTS_AGGREGATE.test(stackTrace.formatted)) {
            aggregate = promise;
          } else {
            aggregate = undefined;
          }
        } else {
          stackTrace = lazyStack(() => formatStack(this, prepare, err, frames));
          aggregate = undefined;
        }
        if (promise === parent) return;
        store.promiseToStack.set(promise, stackTrace);
        const parents = store.childToParent.get(promise) ?? new Set<PendingPromise>();
        if (parent) parents.add(parent);
        store.childToParent.set(promise, parents);
      },
      settled: (settled) => {
        const promise = settled as PendingPromise;
        const store = realmOf(promise).activator()?.promiseStackStore;
        if (!store) return;
        store.childToParent.delete(promise);
        store.promiseToStack.delete(promise);
      },
    }) as () => void;
    this.promiseHookInstalled = true;
    report({ installed: true });
  };
}
