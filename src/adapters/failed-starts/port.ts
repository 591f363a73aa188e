// A failed start's last lines, kept past its container: the bring-up's compensation removes the
// container and Docker's log goes with it, while "why did it fail" is asked right after. A
// directory of files (files.ts) implements it; the worker keeps, `gpures serves logs` reads.
import type { FailedStartLog } from '../../domain/logs';

export interface FailedStartLogs {
  /** Where they are kept, for the operator's lines. */
  readonly where: string;
  /** Keeps `log` as its container's, replacing the one an earlier failure kept. */
  keep(log: FailedStartLog): void;
  /** The container's kept lines, or undefined when none are. */
  read(container: string): FailedStartLog | undefined;
  /** Drops the container's kept lines: a start of it turned healthy since, and they no longer say why it is down. */
  forget(container: string): void;
}
