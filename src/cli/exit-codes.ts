// The exit-code table, in one place (README "Exit codes" says the same to the operator):
//
//   0   ok           done, including "already running" / "already stopped"
//   1   failed       an operation failed after admission (health, identity, image, drain, …) and was
//                    compensated; a promotion that failed and was rolled back; a history that no
//                    longer replays; `serves logs` of a serve with no container; `gpures worker`
//                    stopped past its bound (src/worker/stop.ts), its work left to the next worker;
//                    anything unexpected
//   2   badInput     usage, an invalid manifest or router config, an unknown serve, an unreadable
//                    file, a history file that is not one: nothing was started
//   3   denied       the ledger denied the admission, the serve is busy with another operation,
//                    another promotion of that router is running, `serves extend`/`release` found
//                    no lease standing for the serve, or another worker polls the node's task
//                    queue (`gpures worker`): nothing was changed
//   4   unreachable  Temporal could not be reached or refused a call, no worker answers the node's
//                    ledger, or the worker or `serves logs` cannot reach Docker (DOCKER_HOST): infrastructure that
//                    may come back, for a script to wait on and retry
//   5   notLeased    `serves up --lease`: the serve is up (started, or already running) but the lease
//                    asked could not be applied (no run holds the serve, its lease is already
//                    expiring, …): the result says why; nothing was undone
//   130 interrupted  Ctrl-C while following `serves up`/`down`: the operation goes on in Temporal
//                    (before it was asked of Temporal: nothing was started)
//
// Each mapping from an outcome to its code is below; a command that refuses its input throws a
// CliError carrying the code. Only the program layer (src/cli/main.ts) turns either into the exit.
import { NOT_FRONTEND_HINT, notTemporalFrontend } from '../client/not-frontend';
import type { OperationOutcome } from '../client/operations';
import type { PromotionOutcome } from '../client/promote';

export const EXIT = {
  ok: 0,
  failed: 1,
  badInput: 2,
  denied: 3,
  unreachable: 4,
  /** Up, but not under the lease asked: a script that asked for one must not take the serve as leased. */
  notLeased: 5,
  /** Ctrl-C: 128 + SIGINT, as a shell reports it. */
  interrupted: 130,
} as const;

/** What the operator is told, with the exit code that says which audience it is for; with --json, `details` too. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

/** Failures where nothing was changed on the box: the ledger said no, or the serve is busy. */
const REFUSALS = ['AdmissionDenied', 'ServeBusy'];

/**
 * serves up/down of several serves: the worst of them, a failure before a refusal, a refusal
 * before a serve up whose lease asked was not applied (`notLeased`: which of them, by the command).
 */
export function operationsExit(outcomes: OperationOutcome<unknown>[], notLeased: (o: OperationOutcome<unknown>) => boolean = () => false): number {
  if (outcomes.some((o) => !o.ok && !REFUSALS.includes(o.failureType))) return EXIT.failed;
  if (outcomes.some((o) => !o.ok)) return EXIT.denied;
  if (outcomes.some(notLeased)) return EXIT.notLeased;
  return EXIT.ok;
}

/** A promotion that ran: rolled back is a failure. (A refused start is a CliError with EXIT.denied.) */
export function promotionExit(outcome: PromotionOutcome): number {
  return outcome.ok ? EXIT.ok : EXIT.failed;
}

/** audit replay: nondeterminism is a failure; a file that is not a history only bad input. */
export function replayExit(outcomes: { ok: boolean; errorName?: string }[]): number {
  const failed = outcomes.filter((o) => !o.ok);
  return failed.some((o) => o.errorName !== 'HistoryFileError') ? EXIT.failed : failed.length ? EXIT.badInput : EXIT.ok;
}

/** commander's own exits (usage errors, --help, --version) carry an exitCode; undefined for any other error. */
export function commanderExit(err: unknown): number | undefined {
  if (!(err instanceof Error && 'exitCode' in err && typeof (err as { exitCode: unknown }).exitCode === 'number')) return undefined;
  const code = (err as { code?: string }).code;
  return code === 'commander.helpDisplayed' || code === 'commander.version' || code === 'commander.help' ? EXIT.ok : EXIT.badInput;
}

/**
 * The Temporal client's ServiceError, told by the marker its instanceof itself reads
 * (Symbol.for('__temporal_isServiceError')), so a command that never reached Temporal (--help,
 * validate) need not load the client library to tell.
 */
export function isServiceError(err: unknown): err is Error {
  return err instanceof Error && (err as unknown as Record<symbol, unknown>)[Symbol.for('__temporal_isServiceError')] === true;
}

/**
 * The namespace the command asked for, when Temporal said it has none (the client's
 * NamespaceNotFoundError, told by its marker, here or as the cause of what was thrown).
 */
export function missingNamespace(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if ((e as unknown as Record<symbol, unknown>)[Symbol.for('__temporal_isNamespaceNotFoundError')] === true)
      return String((e as { namespace?: unknown }).namespace);
  }
  return undefined;
}

/** Anything else thrown: Temporal refusing or dropping a call mid-command is the same audience as "unreachable". */
export function unexpectedExit(err: unknown): number {
  return isServiceError(err) || missingNamespace(err) !== undefined ? EXIT.unreachable : EXIT.failed;
}

/** What the server said, under the SDK's own summary ("Failed to query Workflow"): the gRPC status's message. */
function causeText(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  return err.cause instanceof Error ? err.cause.message : err.message;
}

/** The one line an error the commands did not word themselves is told in: Temporal's refusals plainly, anything else with its stack. */
export function unexpectedMessage(err: unknown): string {
  const namespace = missingNamespace(err);
  if (namespace !== undefined) {
    return `Temporal has no namespace '${namespace}': set TEMPORAL_NAMESPACE (or the profile's namespace) to one it has, or create it (temporal operator namespace create ${namespace})`;
  }
  if (notTemporalFrontend(err)) {
    return `Temporal's frontend does not answer there (${causeText(err)}): ${NOT_FRONTEND_HINT} (set TEMPORAL_ADDRESS or a temporal.toml profile)`;
  }
  if (isServiceError(err)) return `Temporal refused the call: ${err.message}${err.cause instanceof Error ? ` (${causeText(err)})` : ''}`;
  return `gpures: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`;
}
