// A container runtime that hands every call to another: the base of the tests' runtimes that
// inject a fault or hold a call, each overriding only the calls it changes.
import type { ContainerRuntime, ContainerSpec } from '../../src/adapters/containers/port';

export class DelegatingRuntime implements ContainerRuntime {
  constructor(protected readonly real: ContainerRuntime) {}

  ensureRunning(spec: ContainerSpec) {
    return this.real.ensureRunning(spec);
  }
  hasImage(image: string) {
    return this.real.hasImage(image);
  }
  inspect(name: string) {
    return this.real.inspect(name);
  }
  stop(name: string, timeoutS: number, onlyId?: string) {
    return this.real.stop(name, timeoutS, onlyId);
  }
  remove(name: string, onlyId?: string) {
    return this.real.remove(name, onlyId);
  }
  list(labels: Record<string, string>) {
    return this.real.list(labels);
  }
  logsTail(name: string, lines: number) {
    return this.real.logsTail(name, lines);
  }
  processes(name: string) {
    return this.real.processes ? this.real.processes(name) : Promise.resolve([]);
  }
}
