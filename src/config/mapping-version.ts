// The mapping_version a router config declares, read from its text without validating the rest:
// promotion records it for the live file, the candidate and every backup, valid or not.
import { parse as parseToml } from 'smol-toml';

/**
 * The top-level `mapping_version` a router config declares; undefined when it declares none.
 * TOML first; a file that is not TOML still gets its first `mapping_version = "…"` line read.
 */
export function mappingVersionOf(text: string): string | undefined {
  try {
    const doc = parseToml(text) as Record<string, unknown>;
    const v = doc['mapping_version'];
    return typeof v === 'string' && v.trim() !== '' ? v : undefined;
  } catch {
    const m = /^[ \t]*mapping_version[ \t]*=[ \t]*"([^"\n]+)"/m.exec(text);
    return m?.[1];
  }
}
