// The set-up's voice on stderr, the same `[gpures] …` lines scripts/lib.sh prints, so a setup run
// reads as one log whichever side did the step.
export function log(message: string): void {
  process.stderr.write(`[gpures] ${message}\n`);
}

export function die(message: string): never {
  log(`error: ${message}`);
  process.exit(1);
}
