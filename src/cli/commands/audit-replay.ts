// gpures audit replay: recorded histories against the current workflow code, no server.
import type { CommandContext, Rendered } from '../command';
import { CliError, EXIT, replayExit } from '../exit-codes';
import { MAX_REPLAY_PROCESSES } from '../../audit/replay-processes';
import { wholeNumber } from '../../domain/inputs';

export async function auditReplay(input: { paths: string[]; processes?: string }, _ctx: CommandContext): Promise<Rendered> {
  const { paths } = input;
  const processes = input.processes === undefined ? undefined : wholeNumber(input.processes);
  if (processes !== undefined && !(processes >= 1 && processes <= MAX_REPLAY_PROCESSES)) {
    throw new CliError(`--processes: a whole number from 1 to ${MAX_REPLAY_PROCESSES} (got '${input.processes}')`, EXIT.badInput);
  }
  const { HistoryFileError } = await import('../../audit/history');
  const { formatReplayOutcome, quietReplayRuntime, replayHistoryFiles } = await import('../../audit/replay');
  quietReplayRuntime();
  const outcomes = await replayHistoryFiles(paths, processes === undefined ? {} : { processes }).catch((err: unknown) => {
    if (err instanceof HistoryFileError) throw new CliError(err.message, EXIT.badInput);
    throw err;
  });
  if (!outcomes.length) throw new CliError(`audit replay: no *.json history in ${paths.join(', ')}`, EXIT.badInput);
  return { data: { ok: outcomes.every((o) => o.ok), outcomes }, text: outcomes.map(formatReplayOutcome), exitCode: replayExit(outcomes) };
}
