// A workflow's JSON input may come from the Temporal UI's start form or `temporal workflow
// start`, not only from gpures: it is checked before the first command, and a malformed one
// fails the run at once instead of retrying its first workflow task forever.
import { ApplicationFailure } from '@temporalio/workflow';
import { ledgerInputProblems, operationInputProblems } from '../domain/inputs';
import type { InputSpec } from '../domain/inputs';
import { Failure } from '../shared/failures';

export function checkInput(input: unknown, spec: InputSpec): void {
  rejectInvalid(operationInputProblems(input, spec));
}

/** The ledger's own: a `{}` from the UI's start form fails the run instead of looping its first workflow task. */
export function checkLedgerInput(input: unknown): void {
  rejectInvalid(ledgerInputProblems(input));
}

function rejectInvalid(problems: string[]): void {
  if (problems.length) throw ApplicationFailure.create({ type: Failure.InvalidInput, message: `invalid input: ${problems.join('; ')}`, nonRetryable: true });
}
