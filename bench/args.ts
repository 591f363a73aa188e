// A bench's numeric flags, checked before anything starts: `--seconds abc` read as NaN ran no
// operation and printed "0 findings", which reads as a pass.

/** `--name`'s value as an integer from `min` to `max`, or an error naming the flag. */
export function intArg(name: string, value: string | undefined, min: number, max: number): number {
  const n = Number(value);
  if (value === undefined || !Number.isInteger(n) || n < min || n > max)
    throw new Error(`--${name} must be an integer from ${min} to ${max} (got ${String(value)})`);
  return n;
}
