// An address that answers gRPC without Temporal's WorkflowService, told apart from a missing
// worker. No imports: the CLI's exit codes use it, and every command loads those, so it must not
// bring the Temporal client with it (a `gpures ledger` answered by the worker loads none).

/** gRPC's UNIMPLEMENTED, as a gRPC server that is not Temporal's frontend answers its WorkflowService. */
export const GRPC_UNIMPLEMENTED = 12;

const NO_WORKFLOW_SERVICE = /unknown service temporal\.api\.workflowservice\.|does not implement the method \/temporal\.api\.workflowservice\./;

/**
 * Whether a call failed because the address serves gRPC but not Temporal's WorkflowService: one of
 * the server's internal services (history, matching), or another program's. Told by the gRPC
 * status the SDK keeps as the cause of its ServiceError.
 */
export function notTemporalFrontend(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const { code, details } = e as { code?: unknown; details?: unknown };
    // Go's grpc (Temporal's own services) and grpc-js each word it their way; a frontend, in Go,
    // knows the service, so its answer for a method it lacks (an old server) is neither.
    if (code === GRPC_UNIMPLEMENTED && typeof details === 'string' && NO_WORKFLOW_SERVICE.test(details)) return true;
  }
  return false;
}

/** What to do about an address that answers gRPC without Temporal's WorkflowService. */
export const NOT_FRONTEND_HINT =
  "the address names another gRPC service, such as one of the Temporal server's internal ones, not its frontend (7233 by default)";
