// A replayer process of `gpures audit replay` (replay-processes.ts starts it): takes the workflow
// code, then history files one at a time from the process that started it, replays each as that
// process's own lanes do, and tells each outcome back, until it is told to end. It exits when the
// process that started it is gone.
import { fileNotReplayed, prepareFile, quietReplayRuntime, replayLane } from './replay';
import type { ReplayOutcome } from './replay';
import { withoutLiveWorkerCosts } from './replay-costs';
import type { FromReplayer, ToReplayer } from './replay-processes';
import type { ReplaySource } from './replay-queue';

type Next = Extract<ToReplayer, { type: 'history' } | { type: 'end' }>;

function tell(m: FromReplayer<ReplayOutcome>): void {
  process.send?.(m);
}

async function main(): Promise<void> {
  quietReplayRuntime();
  process.on('disconnect', () => process.exit(0));
  let coded: (code: string) => void = () => undefined;
  const code = new Promise<string>((resolve) => (coded = resolve));
  const asked: ((m: Next) => void)[] = [];
  process.on('message', (m: ToReplayer) => (m.type === 'code' ? coded(m.code) : asked.shift()?.(m)));

  const files = new Map<number, string>();
  const source: ReplaySource<ReplayOutcome> = {
    take: async () => {
      const answer = new Promise<Next>((resolve) => asked.push(resolve));
      tell({ type: 'take' });
      const m = await answer;
      if (m.type === 'end') return undefined;
      files.set(m.i, m.file);
      tell({ type: 'took', i: m.i });
      return m.i;
    },
    settle: (i, outcome) => {
      files.delete(i);
      tell({ type: 'outcome', i, outcome });
    },
  };
  // Source maps are inline in the code (loadWorkflowBundle).
  const workflowBundle = { code: await code, sourceMap: '' };
  const prepare = (i: number) => prepareFile(files.get(i) ?? '');
  const failed = (i: number, error: Error) => fileNotReplayed(files.get(i) ?? '', 'ReplayerError', error.message);
  await withoutLiveWorkerCosts(() => replayLane(source, prepare, failed, workflowBundle, `gpures-audit-process-${process.pid}`));
}

main().then(
  // Every outcome went before the 'take' that was answered with the end; the SDK's runtime would keep the process alive.
  () => process.disconnect(),
  // This replayer failed: it tells nothing of what it held, which the first process gives back to the others.
  (err: unknown) => {
    process.stderr.write(`gpures audit replay: a replayer process failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
