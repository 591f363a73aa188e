// `node dist/src/worker/bundle-main.js`: the last step of `npm run build`, the workflow bundle
// workers and replays load instead of running webpack at start (prebuilt-bundle.ts).
import { writePrebuiltBundle } from './prebuilt-bundle';

const quiet = { log: () => undefined, trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined };

writePrebuiltBundle({ ...quiet, error: (m: string) => process.stderr.write(`${m}\n`) }).then(
  ({ path, bytes }) => process.stderr.write(`workflow bundle: ${path} (${Math.round(bytes / 1024)} KiB)\n`),
  (err: unknown) => {
    process.stderr.write(`workflow bundle: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
