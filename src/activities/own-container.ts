// What a compensation finds under a serve's container name: the run's own container, none, or
// another run's (a fresh ledger or a take-over let that run start it), which it must leave alone.
import type { ContainerRuntime, ContainerState } from '../adapters/containers/port';
import { isOwnContainer } from '../domain/fence';
import type { OwnContainer } from '../domain/fence';
import { containerName, LABEL } from '../domain/serve';

/** A compensation that found another run's container under the name and changed nothing. */
export interface LeftAlone {
  /** The holder label of the container found (or its short id, unlabelled). */
  leftAlone: string;
}

export type UnderTheName = { own: ContainerState | undefined } | LeftAlone;

/** The container under the serve's name when it is the run's own (or none is there), else whose it is. */
export async function underTheName(runtime: ContainerRuntime, node: string, serve: string, own: OwnContainer): Promise<UnderTheName> {
  const found = await runtime.inspect(containerName(node, serve));
  if (!found || isOwnContainer(found, own)) return { own: found };
  return { leftAlone: found.labels[LABEL.holder] ?? `container ${found.id.slice(0, 12)}` };
}
