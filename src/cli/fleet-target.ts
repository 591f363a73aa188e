// Which nodes a reading command reads: this node from its manifest, one node (--node) or every
// node (--all) from Temporal. Apart from ./fleet.ts, which reads them, so that deciding loads no
// Temporal client.
import { NAME_PATTERN, NAME_RULE } from '../domain/bounds';
import { CliError, EXIT } from './exit-codes';

export interface FleetOpts {
  all?: boolean;
  node?: string;
  manifest?: string;
}

/** The node asked for (`--node`), every node (`--all`: null), or undefined: this node, from its manifest. */
export function fleetTarget(opts: FleetOpts): string | null | undefined {
  if (opts.all && opts.node !== undefined) throw new CliError('give --all or --node NAME, not both', EXIT.badInput);
  if (!opts.all && opts.node === undefined) return undefined;
  if (opts.manifest !== undefined) {
    throw new CliError('--manifest reads this node from its manifest; --all and --node read nodes from Temporal: give one of them', EXIT.badInput);
  }
  if (opts.node !== undefined && !NAME_PATTERN.test(opts.node)) {
    throw new CliError(`--node: a node name of ${NAME_RULE}, as in the manifest's node.name (got '${opts.node}')`, EXIT.badInput);
  }
  return opts.node ?? null;
}
