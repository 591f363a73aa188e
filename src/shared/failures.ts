// Business failures: thrown as ApplicationFailure with these types and never retried, because
// retrying cannot change the answer (the ledger is full, the model is the wrong one, ...).
export const Failure = {
  AdmissionDenied: 'AdmissionDenied',
  IdentityMismatch: 'IdentityMismatch',
  /** The serve answered 401 to its identity probe: it wants an API key the probe did not have. */
  ServeUnauthorized: 'ServeUnauthorized',
  HealthTimeout: 'HealthTimeout',
  ContainerExited: 'ContainerExited',
  ImageMissing: 'ImageMissing',
  PortInUse: 'PortInUse',
  GpuRuntimeMissing: 'GpuRuntimeMissing',
  UnknownServe: 'UnknownServe',
  ManifestInvalid: 'ManifestInvalid',
  /** A workflow's JSON input (from the CLI, the API or the UI's start form) out of shape or bounds. */
  InvalidInput: 'InvalidInput',
  ServeBusy: 'ServeBusy',
  /** A step's fence failed: the run no longer holds the serve's reservation, so it changes nothing. */
  ReservationLost: 'ReservationLost',
  /** A lease's bring-down kept failing: the serve still holds its victims' VRAM, and an operator must look. */
  LeaseExpiryFailed: 'LeaseExpiryFailed',
  DrainTimeout: 'DrainTimeout',
  ReadmitRefused: 'ReadmitRefused',
  TierNotReadmittable: 'TierNotReadmittable',
  VramNotReleased: 'VramNotReleased',
  /**
   * A cold start refused before its container: nvidia-smi shows the card cannot hold what the
   * ledger commits there plus what is held outside the ledger (src/domain/start-room.ts).
   */
  GpuRoomShort: 'GpuRoomShort',
  /** Another start held the GPU's start slot past its own start timeout and margin (src/domain/start-slot.ts). */
  StartSlotBusy: 'StartSlotBusy',
  /** A compensation kept a reservation: its container still runs (its removal failed), so its MiB are not given back. */
  ContainerStillRunning: 'ContainerStillRunning',
  /** vLLM's /sleep refused or failed: the eviction falls back to stopping the victim. */
  SleepFailed: 'SleepFailed',
  /** vLLM's /wake_up (or the weight reload after level 2) failed: the restore falls back to a cold start. */
  WakeFailed: 'WakeFailed',
  RouterNotConfigured: 'RouterNotConfigured',
  RouterAuthFailed: 'RouterAuthFailed',
  UnknownTier: 'UnknownTier',
  RouterConfigInvalid: 'RouterConfigInvalid',
  RouterAdminUnsupported: 'RouterAdminUnsupported',
  RouterAdminRejected: 'RouterAdminRejected',
  GpuNotFound: 'GpuNotFound',
  NvidiaSmiMissing: 'NvidiaSmiMissing',
  NvidiaSmiUnreadable: 'NvidiaSmiUnreadable',
  // router promotion (docs/promotion.md)
  ValidationFailed: 'ValidationFailed',
  CrashLoopDetected: 'CrashLoopDetected',
  HealthzMismatch: 'HealthzMismatch',
  UnknownRouter: 'UnknownRouter',
  RouterNotDeployed: 'RouterNotDeployed',
  PromotionInputInvalid: 'PromotionInputInvalid',
  LiveConfigConflict: 'LiveConfigConflict',
  BackupMissing: 'BackupMissing',
  UnsafeConfigPath: 'UnsafeConfigPath',
  /** An acquisition the router abandoned: nobody waited for it any more (src/domain/abandon.ts). */
  Abandoned: 'Abandoned',
} as const;

export const NON_RETRYABLE: string[] = Object.values(Failure);

// Named, but retried: a later attempt may well succeed, and the type says what the last one met.
export const Transient = {
  /** The serve's container runs but its HTTP port refused or dropped the identity probe. */
  IdentityUnreachable: 'IdentityUnreachable',
  /**
   * A ledger started afresh refuses every Update until its reconcile with the box has ended: an
   * Update it accepted then would be applied whenever Docker answered, long after its caller may
   * have given up. The caller waits for the reconcile and sends the same Update again.
   */
  LedgerReconciling: 'LedgerReconciling',
} as const;
