// One change to the tier table at a time: the admin API's quiesce, readmit and reload, and the
// on-demand queue's own quiesce and readmit, so a readmit's probes never interleave with a quiesce.

export class Mutex {
  private tail: Promise<void> = Promise.resolve();

  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn);
    this.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}
