// A promise bounded in time: the worker's reads that must not hold it (a scrape's nvidia-smi and
// ledger reads, the start-up checks of the GPUs and the router) reject with `message` past `ms`.
export function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
