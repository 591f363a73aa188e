// `node dist/src/dev/images-main.js build [fake-vllm] [fake-router]`: the test images, each
// skipped when up to date (scripts/setup.sh --test runs it once the test dockerd answers). Talks
// to $DOCKER_HOST, else to the test dockerd's socket.
import Docker from 'dockerode';
import { buildBusyboxImage, TEST_IMAGE_RECIPES } from './images';
import type { TestImageName } from './images';
import { die } from './log';
import { TEST_DOCKERD } from './toolchain';

const USAGE = `usage: node dist/src/dev/images-main.js build [${Object.keys(TEST_IMAGE_RECIPES).join('] [')}]\n`;

function isImageName(name: string): name is TestImageName {
  return Object.hasOwn(TEST_IMAGE_RECIPES, name);
}

async function main(argv: string[]): Promise<void> {
  const [command, ...names] = argv;
  if (command !== 'build' || !names.every(isImageName)) {
    process.stderr.write(USAGE);
    process.exit(2);
  }
  const docker = process.env['DOCKER_HOST'] ? new Docker() : new Docker({ socketPath: TEST_DOCKERD.socket });
  const wanted = names.length > 0 ? names : (Object.keys(TEST_IMAGE_RECIPES) as TestImageName[]);
  for (const name of wanted) await buildBusyboxImage(docker, TEST_IMAGE_RECIPES[name]());
}

main(process.argv.slice(2)).catch((err: unknown) => die(err instanceof Error ? err.message : String(err)));
