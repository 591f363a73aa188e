// The bearer check of every endpoint that can change the box (the acquisition API, its ledger
// page, the reference router's admin API): one comparison, in constant time.
import { createHash, timingSafeEqual } from 'node:crypto';

/** A token's digest: what a server keeps to compare against, so the comparison's length is fixed. */
export function tokenDigest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/**
 * Whether an Authorization header carries the token whose digest is `expected`. Both sides are
 * hashed first, so neither the token's length nor where a guess goes wrong shows in the time taken.
 */
export function bearerMatches(header: string | undefined, expected: Buffer): boolean {
  // The token as given, inner spaces and all (a passphrase is a token too); the scheme's case and outer spaces aside.
  const m = /^Bearer\s+(.+?)\s*$/i.exec(header ?? '');
  return timingSafeEqual(tokenDigest(m?.[1] ?? ''), expected) && m !== null;
}
