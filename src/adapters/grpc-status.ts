// gRPC status codes of Temporal's answers, as numbers (the gRPC spec's; @grpc/grpc-js is not a
// dependency of ours): which failures asking again may cure, and which it never will.
import { isGrpcServiceError, ServiceError } from '@temporalio/client';

export const GrpcStatus = {
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

/** The gRPC code of an error from the Temporal client, whether raw or wrapped in the SDK's ServiceError; undefined for any other error. */
export function grpcCode(err: unknown): number | undefined {
  const grpc = err instanceof ServiceError ? err.cause : err;
  return isGrpcServiceError(grpc) ? grpc.code : undefined;
}

/** The server could not answer now (down, restarting, its store away, too slow): the same call may succeed in a moment. */
export function temporalBusy(err: unknown): boolean {
  const code = grpcCode(err);
  return (
    code === GrpcStatus.UNAVAILABLE ||
    code === GrpcStatus.DEADLINE_EXCEEDED ||
    code === GrpcStatus.RESOURCE_EXHAUSTED ||
    code === GrpcStatus.INTERNAL ||
    code === GrpcStatus.UNKNOWN
  );
}

/**
 * A start refused for a search attribute the namespace has registered but the server's namespace
 * cache does not map yet: for about a second after registering one (seen on temporal-server with
 * PostgreSQL), every start that sets it is refused, then accepted.
 */
export function searchAttributeNotYetMapped(err: unknown): boolean {
  const grpc = err instanceof ServiceError ? err.cause : err;
  return grpcCode(err) === GrpcStatus.INVALID_ARGUMENT && isGrpcServiceError(grpc) && /has no mapping defined for search attribute/i.test(grpc.details);
}
