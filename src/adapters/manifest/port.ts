// Where activities read the manifest from: a file for the worker (src/worker/worker.ts), a string in tests.

export interface ManifestSource {
  /** Returns the manifest's text and the file name used in error messages. */
  read(): Promise<{ text: string; file: string }>;
}
