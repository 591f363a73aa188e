// Debian's headless Chromium for tests, driven by playwright-core (which downloads no browser):
// one browser per test file (it is heavy on 2 cores), a fresh profile in a temp dir removed after.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import type { BrowserContext } from 'playwright-core';
import { TEST_BROWSER } from '../../src/dev/toolchain';

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface TestBrowser {
  context: BrowserContext;
  close(): Promise<void>;
}

/** Chromium at /usr/bin/chromium (scripts/setup.sh --test installs Debian's), on a profile of its own. */
export async function launchChromium(): Promise<TestBrowser> {
  const profile = mkdtempSync(join(tmpdir(), 'gpures-chromium-'));
  try {
    // A persistent context is how playwright takes a --user-data-dir: the temp dir is the profile.
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: TEST_BROWSER.executable,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: 1280, height: 900 },
    });
    return {
      context,
      async close() {
        try {
          await context.close();
        } finally {
          rmSync(profile, { recursive: true, force: true });
        }
      },
    };
  } catch (err) {
    rmSync(profile, { recursive: true, force: true });
    throw new Error(
      `cannot start ${TEST_BROWSER.executable} (scripts/setup.sh --test installs Debian's ${TEST_BROWSER.aptPackage}): ${(err as Error).message}`,
    );
  }
}
