// gpures audit replay: recorded histories against the current workflow code, no server.
import type { CommandContext, Rendered } from '../command';
import { CliError, EXIT, replayExit } from '../exit-codes';

export async function auditReplay(input: { paths: string[] }, _ctx: CommandContext): Promise<Rendered> {
  const { paths } = input;
  const { HistoryFileError } = await import('../../audit/history');
  const { formatReplayOutcome, quietReplayRuntime, replayHistoryFiles } = await import('../../audit/replay');
  quietReplayRuntime();
  const outcomes = await replayHistoryFiles(paths).catch((err: unknown) => {
    if (err instanceof HistoryFileError) throw new CliError(err.message, EXIT.badInput);
    throw err;
  });
  if (!outcomes.length) throw new CliError(`audit replay: no *.json history in ${paths.join(', ')}`, EXIT.badInput);
  return { data: { ok: outcomes.every((o) => o.ok), outcomes }, text: outcomes.map(formatReplayOutcome), exitCode: replayExit(outcomes) };
}
