// Business failures: thrown as ApplicationFailure with these types and never retried, because
// retrying cannot change the answer (the ledger is full, the model is the wrong one, ...).
export const Failure = {
  AdmissionDenied: 'AdmissionDenied',
  IdentityMismatch: 'IdentityMismatch',
  HealthTimeout: 'HealthTimeout',
  ContainerExited: 'ContainerExited',
  ImageMissing: 'ImageMissing',
  PortInUse: 'PortInUse',
  GpuRuntimeMissing: 'GpuRuntimeMissing',
  UnknownServe: 'UnknownServe',
  ManifestInvalid: 'ManifestInvalid',
  ServeBusy: 'ServeBusy',
  /** A step's fence failed: the run no longer holds the serve's reservation, so it changes nothing. */
  ReservationLost: 'ReservationLost',
  DrainTimeout: 'DrainTimeout',
  ReadmitRefused: 'ReadmitRefused',
  TierNotReadmittable: 'TierNotReadmittable',
  VramNotReleased: 'VramNotReleased',
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
} as const;

export const NON_RETRYABLE: string[] = Object.values(Failure);
