// A node's worker as its own process (the fleet test, the sleep kill test): `gpures worker` (runWorker, configured by its environment)
// with the simulated box's runtime instead of Docker, so its serves are processes it starts in its
// own network namespace, where Docker-published ports (on the host's loopback) would not be.
//   node dist/test/support/fleet-worker.js --manifest FILE --state DIR
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { parseManifest } from '../../src/config/manifest';
import { SimRuntime } from '../../src/sim/runtime';
import { runWorker } from '../../src/worker/main';

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { manifest: { type: 'string' }, state: { type: 'string' } } });
  if (!values.manifest || !values.state) throw new Error('usage: fleet-worker --manifest FILE --state DIR');
  const parsed = parseManifest(readFileSync(values.manifest, 'utf8'), values.manifest);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  await runWorker({ manifestPath: values.manifest, node: parsed.manifest.node, gpus: 'off', runtime: new SimRuntime({ stateDir: values.state }) });
}

main().catch((err: unknown) => {
  process.stderr.write(`fleet-worker: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
