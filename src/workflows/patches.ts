// Every patch id the workflows branch on, in one place. A recorded history (test/histories/)
// pins each side of a patch: a run recorded before the change replays the old branch, a run
// recorded after it replays the new one. Ids are history: never rename one; retire it only with
// deprecatePatch() once no run that predates it can still be replayed.
export const PATCHES = {
  /** The admission runs outside cancellation. Before: bring-up-before-admit-whole.json; after: bring-up.json, denial.json. */
  admitWhole: 'admit-whole',
  /** A victim's quiesce runs outside cancellation. Before: eviction-before-preflight.json; after: eviction.json, drain-timeout.json. */
  quiesceWhole: 'quiesce-whole',
  /** The eviction checks image, nvidia-smi and readmit path before touching a victim. Before: eviction-before-preflight.json; after: eviction.json. */
  evictionPreflight: 'eviction-preflight',
  /**
   * A readmitted tier is quiesced again if the run still fails.
   * Before: bring-up-before-admit-whole.json; after: bring-up.json, restore-child-bring-up.json.
   */
  requiesceOnCompensate: 'requiesce-on-compensate',
  /** Bring-down takes its serve in the ledger before the stop. Before: restore-before-fenced.json; after: restore.json. */
  bringDownFenced: 'bring-down-fenced',
  /**
   * A cancelled run ends Cancelled, not Failed. Reached only by a cancel, which no recording has:
   * test/acquire.test.ts and test/bring-up.test.ts cancel runs.
   */
  cancelledEndsCancelled: 'cancelled-ends-cancelled',
  /** A bring-down cancelled before its stop readmits the tier. Reached only by cancelling a bring-down mid-drain, which no recording or test does yet. */
  bringDownCancelReadmits: 'bring-down-cancel-readmits',
  /**
   * A run started without its search attributes (the UI, `temporal workflow start`, a parent) upserts
   * them (src/workflows/run-tags.ts). Before: every recording (each was started tagged by gpures, or
   * replays untagged: restore-child-bring-up.json); after: test/run-tags.test.ts starts runs untagged.
   */
  runTags: 'run-tags',
  /**
   * A victim with eviction = "sleep" is put to sleep (stop as the fallback) instead of stopped.
   * Reached only by a victim that declares sleep, which no recording before it has; after: sleep-eviction.json.
   */
  evictBySleep: 'evict-by-sleep',
  /** The restore of a sleeping serve wakes it (cold start as the fallback). Before: none has slept; after: wake-restore-child-bring-up.json. */
  wakeOnRestore: 'wake-on-restore',
  /**
   * The read-only steps and the ledger's Updates on an operation's way through run as local
   * activities (proxies.ts reads(), ledgerUpdates()). Before: every other recording; after:
   * bring-up-local-steps.json, eviction-local-steps.json, restore-local-steps.json (and its child bring-up).
   */
  localSteps: 'local-steps',
  /**
   * A lease's renew signal whose terms it cannot hold (no holder, seconds past their bound) is
   * dropped instead of taken. Reached only by such a signal, which no recording has: test/lease.test.ts sends one.
   */
  leaseRenewalChecked: 'lease-renewal-checked',
  /**
   * A victim's sleep whose fence refused fails the acquisition instead of falling back to an
   * unfenced stop. Reached only by a ledger lost mid-eviction, which no recording has:
   * test/sleep-eviction.test.ts loses one during the drain.
   */
  sleepRefusedFails: 'sleep-refused-fails',
  /**
   * A bring-down that took over an acquisition readmits its running victims after registering its
   * let-go, so a failure there gives the serve back. The same commands when nothing fails; reached
   * only by a take-over with victims running, which no recording has: test/fence-race.test.ts takes one over.
   */
  takeReadmitsCompensated: 'take-readmits-compensated',
  /**
   * An acquisition of a sleeping serve that fails stops the sleeper before it releases its
   * reservation, not after. Reached only by an acquisition of a sleeper, which no recording has:
   * test/sleep-eviction.test.ts cancels one mid-wake.
   */
  sleeperStoppedBeforeRelease: 'sleeper-stopped-before-release',
  /**
   * An acquisition of a sleeping serve whose wake's fence refuses (a ledger started afresh holds the
   * sleeper) no longer stops it as a compensation. Reached only by a ledger lost between the
   * acquisition's admission and its wake, which no recording or test does yet. Asked too, since
   * start-refused-leaves-container, when the cold start of such an acquisition's sleeper is refused.
   */
  wakeRefusedLeavesSleeper: 'wake-refused-leaves-sleeper',
  /**
   * A compensation gives a serve's MiB back only once its container is seen not to run (a removal
   * that failed keeps them reserved): one more read before the release. Recordings that compensate
   * replay without it; reached by every failed or cancelled bring-up or acquisition since
   * (test/bring-up.test.ts cancels one), and kept back by test/fence-faults.test.ts's failed removal.
   */
  giveBackWhenDown: 'give-back-when-down',
  /**
   * A run whose start fence refuses (ReservationLost: a ledger started afresh holds the serve for
   * another run, which may have started its container under the same name) no longer stops and
   * removes that name as a compensation (REMOVE_CONTAINER, and an acquisition's STOP_SLEEPER, and a
   * restore's wake removal before its cold start), and its give-back no longer waits for that
   * container to stop: the start step removed its own container by id. A wake whose fence refuses
   * gives back without that wait too. Asked only on a refused start or wake, which no recording
   * had. Before: start-refused-before-leaves-container.json and
   * acquire-start-refused-before-leaves-container.json (a bring-up's and an acquisition's, the
   * other run's container removed by name); after: start-refused-leaves-container.json;
   * test/fence-start-refused.test.ts loses the ledger while a run waits at its start fence.
   */
  startRefusedLeavesContainer: 'start-refused-leaves-container',
  /**
   * The ledger: a bring-down that lets go of a serve it took from running gives the hold back to
   * the run it took it from (before, it kept it, and a lease retrying its expiry found the serve no
   * longer its own). Reached only by a bring-down that fails or is cancelled after its take, which
   * no recording has: test/ledger-workflow.test.ts lets one go.
   */
  letGoRestoresHolder: 'let-go-restores-holder',
  /**
   * A lease's expiry brings its serve down only while the acquisition that granted the lease still
   * holds it running (the bring-down's take checks it in the ledger), not a newer acquisition's.
   * The same commands, its child's input aside; reached by every lease expiry since, which no
   * recording has: test/lease.test.ts acquires a serve anew under an expiring lease.
   */
  leaseDownOnlyItsOwn: 'lease-down-only-its-own',
  /**
   * A bring-up whose serve is healthy and verified no longer fails when nvidia-smi fails to read
   * the VRAM it took (evidence, not a gate): the delta is said not measured. The same commands
   * when the reading works; reached only by a reading that fails after health, which no recording
   * has: test/measure-evidence.test.ts fails one.
   */
  measureNotAGate: 'measure-not-a-gate',
  /**
   * A restore's bring-up is abandoned, not terminated, when its bring-down closes (terminated from
   * the UI, or timed out): it sees its serve up or gives it back. The child's start command gains
   * its parent close policy; reached by every restore since, which the recordings before it
   * (restore.json, wake-restore.json) do not have: test/restore.test.ts terminates a bring-down mid-restore.
   */
  restoreOutlivesBringDown: 'restore-outlives-bring-down',
  /**
   * A bring-down of a serve the ledger held no reservation of (a stray container) that fails or is
   * cancelled before its stop lets go of its 0 MiB hold even while the container runs. Reached only
   * by such a cancel, which no recording has: test/acquire.test.ts cancels one mid-drain.
   */
  letGoOfNothing: 'let-go-of-nothing',
  /**
   * An expiring lease whose serve is in another operation's hands that may give it back (a serves
   * down that took it, an eviction of it), or that finds another serves down under way, waits and
   * looks again instead of ending for good. Reached only by those, which no recording has:
   * test/lease.test.ts cancels a serves down and fails an eviction under an expiring lease.
   */
  leaseWaitsOutOthers: 'lease-waits-out-others',
  /**
   * An acquisition cancelled while its lease starts is cancelled (its saga undoes the acquisition)
   * instead of completing with no lease: before, the cancellation was taken for a lease that could
   * not start, and the serve stayed up with nothing to give its VRAM back. Reached only by a cancel
   * in that window, which no recording has: test/lease-start-cancel.test.ts holds the lease's start.
   */
  leaseStartCancellable: 'lease-start-cancellable',
  /**
   * A bring-down that takes over an acquisition of a sleeping serve before its victims were down
   * holds the sleeper's residual while it stops it, not 0 MiB: its process sleeps on with it, and
   * a bring-up admitted into those MiB ran the box past its budget. The ledger's state only;
   * reached only by such a take-over (the acquisition terminated mid-eviction), which no recording
   * has: test/sleep-fences.test.ts terminates one.
   */
  takenSleeperKeepsResidual: 'taken-sleeper-keeps-residual',
  /**
   * A bring-down that takes over an acquisition whose victim it finds asleep, its release never
   * confirmed (still evicting), holds that victim's whole reservation, not its declared residual.
   * The ledger's state only; reached only by such a take-over (an acquisition terminated during a
   * victim's release check), which no recording has: test/sleep-fences.test.ts terminates one.
   */
  takenVictimAsleepHeldWhole: 'taken-victim-asleep-held-whole',
  /**
   * A promotion runs only under its own id, promote/<node>/<router> of the task queue's node:
   * started under another (the UI's form, a script), it would run beside the CLI's, each writing
   * the live config and rolling the other back. Refused at input. Asked only of a run under
   * another id, so a promotion under its own records the same commands: promote-success.json and
   * promote-rollback.json replay unchanged; a run under another id: test/promote-race.test.ts.
   */
  promoteOnlyUnderItsId: 'promote-only-under-its-id',
  /**
   * An acquisition that finds its serve already running applies the lease terms asked (its own and
   * any joined) to the serve's lease, fenced to the run the ledger says holds the serve: it starts
   * one when none runs, else makes the running one last at least that long (leaseAtLeastSignal).
   * A router's idle terms are applied only to a serve an acquisition holds (none to one brought up by hand).
   * Before, it completed already-running with the terms dropped. Reached only by an already-running
   * acquisition asked for a lease, which no recording has: test/api-join.test.ts POSTs lease_s for one.
   */
  leaseOnAlreadyRunning: 'lease-on-already-running',
  /**
   * An acquisition that started its serve applies the lease terms of the callers that joined it
   * (joinLeaseSignal) after its own: the lease starts with the first and lasts at least each of
   * the others. Before, a joiner's terms were never seen (USE_EXISTING keeps the first input).
   * Reached only by a joined run, which no recording has: test/api-join.test.ts joins one.
   * The lease's at-least signal and the acquisition's join signal need no patch of their own: no
   * recorded history carries either, and a run that gets none records the same commands.
   */
  leaseJoinsHonoured: 'lease-joins-honoured',
  /**
   * A promotion's write is journaled with `verifies`, and a promotion that succeeds journals
   * `verified` of its candidate (one more activity, promoteVerified, after the verify), so the next
   * promotion can tell a candidate left unverified (its run terminated mid-verify, which runs no
   * rollback) from a verified one. Asked before the backup of every promotion that writes:
   * promote-success.json and promote-rollback.json replay without it; after: test/promote-terminated.test.ts.
   */
  promoteJournalsVerified: 'promote-journals-verified',
  /**
   * A promotion whose live config is another run's unverified write (the journal's word, read at
   * resolve) is refused before its validate, naming that run and its backup. Asked only of such a
   * run, so the others record the same commands; reached only after a promotion terminated
   * mid-verify, which no recording has: test/promote-terminated.test.ts terminates one.
   */
  promoteRefusesUnverifiedLive: 'promote-refuses-unverified-live',
  /**
   * A rollback whose restore is refused (someone else changed the live config since this run
   * wrote it: LiveConfigConflict) still brings back the image this run switched, under that config,
   * and verifies the router healthy on whatever mapping it names. Before, the rollback stopped at
   * the refused restore and left the router on the new, failed image. Asked only on that refusal
   * of a run that recreated the router, which no recording has: test/promote-race.test.ts edits the
   * config during the verify of an image change.
   */
  rollbackImageUnderOthersConfig: 'rollback-image-under-others-config',
  /**
   * An acquisition asks a running lease to last at least its callers' terms by an Update (through
   * the leaseAtLeast activity) that answers whether the lease took them, instead of a signal it
   * took as taken: a lease already expiring ignores them and its serve goes down, and the result
   * (leaseNotApplied, leaseTermsNotApplied) now says so instead of "asked to last at least". An
   * activity where a signal was; asked only where the lease already runs, which no recording has:
   * test/api-join.test.ts POSTs lease_s for a serve whose lease is expiring.
   */
  leaseAtLeastAnswered: 'lease-at-least-answered',
  /**
   * A router's idle terms (its POST without lease_s) that join an acquisition or find its serve up
   * only make the lease that runs for the serve's holder last longer: the leaseAtLeast activity's
   * Update alone, its terms marked extendOnly, with no lease started first (none running, the
   * lease is answered `none`; one held by another run answers `not-this-holder` instead of taking
   * them as a renewal). So a serve an operator acquired without a lease stays up until serves down.
   * Before, they started an idle lease on it (a StartChildWorkflowExecution where the activity now
   * is), or renewed the lease an earlier acquisition left running. Asked only for idle terms in
   * leaseAtLeast, past its refusals, which no recording has: test/api-join.test.ts joins an
   * operator's acquisition with the router's POST, POSTs for it once up, and for one re-acquired
   * while its old lease runs. Runs from before it go on as they were, lease-at-least-answered's
   * Update (or the signal before it) included. The lease's handler needs no patch: the flag is in
   * the Update's payload, which no recorded history carries.
   */
  idleTermsOnlyExtend: 'idle-terms-only-extend',
  /**
   * A bring-down that takes over an acquisition's hold reads the quiesce mark of each victim still
   * running before its take (the quiesceMarks activity, where a take-over had none), and its
   * readmit of them sends it back: the router lifts only that quiesce, not one an eviction or a
   * bring-down of the victim made since. Before: take-over-victims-before-marks.json; after:
   * take-over-victims.json (a take-over with its victim running); test/victim-readmit-race.test.ts
   * evicts the victim while the readmit is held.
   */
  victimReadmitMarked: 'victim-readmit-marked',
  /**
   * A lease that is expiring with a renewal waiting (a new acquisition of its serve renewed it)
   * takes the at-least terms of that acquisition's other callers as at least, on the renewal: it
   * runs on with the renewal's terms, lasting at least until what each asked, and answers
   * `at-least`. Before, each replaced the renewal (answered `renewed`), so a joiner asking a minute
   * left the lease a minute where its first caller asked an hour. Asked in the lease's at-least
   * handler, only there: test/histories/lease-renewal-joined.json (recorded before) replays with
   * `renewed`; after: test/lease-terms.test.ts.
   */
  leaseRenewalAtLeast: 'lease-renewal-at-least',
  /**
   * An acquisition whose start of the serve's lease is refused (one runs already) and whose terms
   * then do not reach it (the hand-over's signal fails: not found) starts the lease again, up to
   * three times: the lease found running had closed in between (its end was under way), and none
   * runs now. Before, the terms were dropped there and the serve stayed up
   * unleased ("the lease could not be started (Unable to signal external workflow because it was
   * not found)"). Asked only after such a refusal: lease-joins-flood.json and
   * lease-renewal-joined.json have refused starts (recorded before, they replay with it false);
   * test/fixtures/held-histories/lease-start-closed.json (recorded before, under the test's hold
   * of the tell, so it replays only against that bundle: test/lease-terms.test.ts replays it, the
   * terms dropped) and, after, test/lease-terms.test.ts holds the tell while the old lease closes.
   */
  leaseStartedAgainWhenClosed: 'lease-started-again-when-closed',
  /**
   * An acquisition applies the lease terms of its joiners folded (foldedTerms in acquire.ts): the
   * first waiting as it is, then only the longest fixed and one idle of the rest, so a flood of
   * POSTs joining one run costs it at most three leaseAtLeast activities per batch, and its lease
   * as many Updates, where before each joiner cost one of each (500 joins: the acquisition's
   * history 6131 events, the lease's 1513). The join signals themselves are still recorded, one
   * each. Asked by every run that applies terms, before the first: a run without terms records the
   * same commands (the recorded histories replay unchanged).
   */
  leaseJoinsFolded: 'lease-joins-folded',
  /**
   * An acquisition that evicts upserts GpuresVictims (its victims) once it has picked them, after
   * asking the worker whether the attribute is registered (tagVictims in src/workflows/run-tags.ts):
   * a local activity and an upsert before the preflight. Before: eviction.json,
   * eviction-before-victims-tag.json, sleep-eviction-before-victims-tag.json (they replay untagged);
   * after: eviction-victims-tagged.json; test/run-tags.test.ts finds an eviction by its victim.
   */
  victimsTagged: 'victims-tagged',
  /**
   * A bring-down's restore runs outside cancellation once its stop has landed: a cancel of
   * `serves down X --restore` after the stop is not passed on to the victim's bring-up (which gave
   * back its reservation, so the victim fell off the ledger and no restore brought it back), and
   * the run completes saying the cancel was not taken. Asked by every `--restore` run after its
   * release; a run not cancelled records the same commands but for the marker. Before: restore.json,
   * wake-restore.json, restore-local-steps.json; after: restore-whole.json;
   * test/restore.test.ts cancels one while its restore brings a victim up.
   */
  restoreWhole: 'restore-whole',
  /**
   * An expiring lease starts its bring-down with cancellation type ABANDON: a cancel of the lease
   * (the UI, `temporal workflow cancel`) is not passed on to the bring-down, which goes on to stop
   * the serve and restore its victims, and the lease ends Cancelled at once, the cancel not
   * counted as a failed bring-down. Before, the cancel reached the bring-down, which before its
   * stop readmitted the serve's tier and ended Cancelled: the serve stayed up holding its MiB, its
   * victims evicted, with no lease left to give them back. The child's start command gains its
   * cancellation type; asked by every lease expiry since, which no recording before it has; after:
   * lease-cancelled-expiring.json (recorded by test/lease-cancel.test.ts, the lease cancelled
   * while its bring-down drains).
   */
  leaseCancelLeavesBringDown: 'lease-cancel-leaves-bring-down',
  /**
   * An expiring lease past its history's bound (MAX_HISTORY_EVENTS, or its input's
   * maxHistoryEvents) continues as new, its input saying it is expiring and what it knew (released,
   * failures, a serves down found under way, its waits on other operations, a renewal waiting):
   * while the ledger does not answer, or other operations are waited out, the expiry added a few
   * events a minute and never continued (about ten days to the history limit). Asked only when the
   * history is long at an expiry's look (before each ledger read, and before each retry of one),
   * which no recording before it has; after: lease-expiry-continued.json and its next run
   * lease-expiry-continued-run2.json, from test/lease-expiry-continues.test.ts (a bound of 30).
   */
  leaseExpiryContinues: 'lease-expiry-continues',
  /**
   * A running idle lease that is overdue and whose router does not answer its tier's use (asked
   * again each minute: an activity, a timer, a workflow task) continues as new past its history's
   * bound, carrying its terms and clock, as its wait for the expiry does; the new run asks the
   * router at once. Before, only that wait checked the bound, so a router down for three or four
   * days took the lease to the history limit, terminated with its serve holding its victims' MiB.
   * Asked only after a failed ask, when the history is long, which no recording before it has;
   * after: lease-router-retry-continued.json and its next runs lease-router-retry-continued-run2.json
   * and -run3.json, from test/lease-expiry-continues.test.ts (a bound of 20, the router's tier
   * answering 503).
   */
  leaseRouterRetryContinues: 'lease-router-retry-continues',
  /**
   * A compensation's give-back that finds a container running under the serve's name that is not
   * the run's own (not the id it started or woke, nor labelled with its holder: another run's,
   * which its removal left alone) releases without waiting for it, instead of keeping the MiB as if
   * that container held them (ContainerStillRunning). Asked only when such a container runs at the
   * give-back, which no recording had. Before: removal-failed-before-leaves-others.json and
   * lost-at-running-before-leaves-others.json (their compensation removed the other run's container
   * by name, so none ran at the give-back); after: removal-failed-leaves-others.json and
   * lost-at-running-leaves-others.json; test/fence-leftovers.test.ts loses a run's ledger around its
   * start and lets an acquisition start the serve.
   */
  giveBackBesideOthers: 'give-back-beside-others',
  /**
   * A bring-down whose stop its fence refused (the `stop` step: a ledger restarted since its take
   * holds the serve running for the run on its container's label) readmits the tier it quiesced,
   * with its own quiesce's mark, and no longer lets go of the hold (its setPhase was refused: the
   * hold is another run's). Asked only on a refused stop, which no run before the stop's fence
   * could meet. Before: stop-refused-before-fenced.json (the old code stopped the serve, its
   * release refused); after: stop-refused-readmits.json; test/fence-stop.test.ts loses the ledger
   * while a bring-down drains.
   */
  stopRefusedReadmits: 'stop-refused-readmits',
  /**
   * The ledger: a start retried after the ledger restarted, finding the serve running for its own
   * run (the fresh ledger took over the container an earlier attempt created, by its holder
   * label), goes on and adopts it; before, it was refused and the step removed the container.
   * Asked only in that case (an attempt lost after its create, and the ledger lost with it), which
   * no recording or end-to-end test reaches yet: test/fence.test.ts holds the rule.
   */
  startFindsOwnRunning: 'start-finds-own-running',
  /**
   * A cold start (a bring-up's, an acquisition's after its evictions, a restore's) checks the card
   * physically has the room before its container is started: the readStartRoom activity (the GPU,
   * its compute processes, the ledger, its serves' pids) where measureGpu read the baseline alone,
   * and a refusal (GpuRoomShort) when what the ledger commits plus what is held outside it exceeds
   * the card. Asked by every cold start since. Before: every other recording (measureGpu);
   * after: start-room-refused.json (recorded by test/start-room-box.test.ts with GPURES_SAVE_HISTORIES=DIR).
   */
  startRoomChecked: 'start-room-checked',
  /**
   * A cold start or a wake takes its GPU's start slot in the ledger before its room check and its
   * container's create (or the wake), waiting while another start holds it, and gives it back once
   * measured (src/workflows/start-slot.ts). Asked by every cold start and wake since. Before: every
   * other recording; after: start-slot-waited.json (recorded by test/start-slot.test.ts).
   */
  startSlot: 'start-slot',
  /**
   * An acquisition that plans evictions reads the card's room (readStartRoom, its planned victims
   * counted as evicted) before its first quiesce, and refuses with GpuRoomShort, nothing quiesced
   * or stopped, when even those evictions would not make the room; the check before its start stays
   * (a process may take the room during the drain). Asked by every acquisition that evicts since.
   * Before: every other eviction recording (the room read at the start only); after:
   * eviction-room-refused.json (recorded by test/eviction-room.test.ts with GPURES_SAVE_HISTORIES=DIR).
   */
  roomBeforeEviction: 'room-before-eviction',
  /**
   * A restore of a sleeping serve registers its container's removal once it holds the start slot,
   * not before its wait: a cancel (or StartSlotBusy) while it waits leaves the sleeper asleep, and
   * its compensation's release puts the reservation back asleep as the admission found it
   * (keepAsleep) instead of releasing it. No command changes but the marker; asked by every wake
   * that takes the slot. Before: every recording (none waits for the slot to wake); after:
   * restore-cancelled-waiting-slot.json (recorded by test/start-slot.test.ts, a restore cancelled while it waits).
   */
  sleeperKeptUntilWoken: 'sleeper-kept-until-woken',
  /**
   * A wake that falls back to a cold start renews the start slot it holds (one more startSlot
   * Update, renew): the slot's since is then, so a waiting start's bound (the holder's start
   * timeout and 120 s from since) covers the cold start as well as the wake. Asked only on that
   * fallback while the slot is held, which no recording has; test/start-slot.test.ts's unit case
   * holds the rule (decideStartSlot).
   */
  slotRenewedOnColdStart: 'slot-renewed-on-cold-start',
  /**
   * A bring-down's quiesce tells the router why (`?reason=operator-down`, or `lease-ended` from a
   * lease's end, and the serve's name): the router answers such a tier 503 without Retry-After,
   * naming `gpures serves up <serve>`, where before a client was told to retry a serve nobody
   * would bring back. The quiesce activity's input gains the reason; asked by every bring-down that
   * quiesces since. Before: every other recording; after: bring-down-operator-down.json (recorded by
   * test/router-operator-down.test.ts with GPURES_SAVE_HISTORIES=DIR).
   */
  bringDownSaysWhy: 'bring-down-says-why',
  /**
   * A bring-down of a serve found evicted or asleep (set aside: its tier quiesced by its eviction,
   * which gave no reason) tells the router why once the serve is down: one more quiesce of the
   * tier, with the bring-down's reason and the serve's name, after the release. Only the reason
   * changes at the router (and the quiesce mark moves: nothing is to readmit it by the eviction's).
   * Before, that tier kept answering "evicted or draining; retry later" with Retry-After, though
   * the down dropped the serve's restore link and nothing would bring it back. Asked only on that
   * path: every other recording predates it or does not take it; after:
   * bring-down-evicted-operator-down.json (recorded by test/router-operator-down.test.ts).
   */
  setAsideSaysWhy: 'set-aside-says-why',
  /**
   * A bring-down whose first stop attempt was refused by a ledger started afresh and found the
   * serve down (fencedOrDown's downAfterRefusal with stop already-stopped or absent: its container
   * exited, left on the box, nothing held) completes `already-stopped`, 'serves down X: already
   * stopped, nothing changed', where it said 'serves down X: stopped' (its wasDown wanted remove
   * `absent`, and the exited container is left). Asked only on that path, which no recording
   * reaches: test/stop-retry-fence.test.ts case 3 takes it.
   */
  foundDownNothingStopped: 'found-down-nothing-stopped',
  /**
   * A cold start's measure step asks the serve's own processes first (measureOwnProcesses) and reads
   * the whole GPU (measureGpu, a local activity: an nvidia-smi spawn where no stream runs) only
   * where they cannot say, instead of reading the GPU first and then asking them: the whole-GPU
   * reading went unused whenever they could. Asked by every cold start that measures since.
   * Before: start-slot-waited.json (its measure reads the GPU, then the processes); after:
   * measure-own-first.json (recorded by test/start-slot.test.ts with GPURES_SAVE_HISTORIES=DIR).
   */
  measureOwnFirst: 'measure-own-first',
  /**
   * Stops take the GPU's start slot (src/workflows/start-slot.ts): memory freed during another
   * serve's profiling fails that start as memory taken does. A bring-down (`serves down`, a lease's
   * expiry) whose serve's container runs takes it after its drain and before its stop, reads its
   * own processes' VRAM back after the stop, and gives it back with its release; past its bound it
   * fails with nothing stopped, its tier readmitted. An acquisition that evicts takes it before its
   * first victim's stop or sleep and holds it through its own start, its bound (holdS) counting its
   * victims and its start. A run that took it and fails gives it back once compensated (the saga's
   * done-step). Before: every other recording; after: stop-slot-waited.json and
   * evict-slot-waited.json (recorded by test/start-slot.test.ts with GPURES_SAVE_HISTORIES=DIR).
   */
  stopTakesSlot: 'stop-takes-slot',
  /**
   * The ledger's beginStop that takes a serve over from a run its caller showed ended frees the
   * start slot that run held (an acquisition terminated between its first victim's stop or sleep,
   * which takes the slot since stop-takes-slot, and its start): it stayed held, `gpures ledger`
   * saying the ended run 'is evicting to start', until a waiting start's 30 s status check took it
   * over. Asked only where it decides (the slot held by the run taken over), which no recording
   * reaches: sleep-eviction.test's case 5 and sleep-fences.test's case 2 take it.
   */
  takeOverFreesSlot: 'take-over-frees-slot',
  /**
   * An acquisition resolves each victim's manifest entry once: the start slot's take before its
   * first victim's stop (stop-takes-slot) resolved every victim again for its stop timeout, the
   * first one just resolved by its own eviction, and each later victim was resolved once more by
   * its own eviction (a local activity each, a manifest read and parse). The take now uses the
   * first victim's and keeps the later ones' for their evictions. Asked by every acquisition that
   * takes the slot to evict. Before: evict-slot-waited.json; after: evict-victims-resolved-once.json
   * (recorded by test/start-slot.test.ts with GPURES_SAVE_HISTORIES=DIR).
   */
  victimsResolvedOnce: 'victims-resolved-once',
  /**
   * The room check (readStartRoom: an nvidia-smi listing, the ledger's snapshot, docker top) runs as
   * a local activity, in the workflow task that reaches it, as the other reads do (local-steps): no
   * dispatch, and no workflow task of its own after it. An acquisition's room before its evictions
   * runs beside its preflight (both read-only, before any victim is touched; the preflight's
   * failure is still the one told when both fail), and its first victim's manifest entry is
   * resolved in the same task. Asked by every room check since. Before: eviction-room-refused.json
   * and every other recording that checks the room; after: eviction-room-local.json (recorded by
   * test/eviction-room.test.ts with GPURES_SAVE_HISTORIES=DIR).
   */
  roomReadLocal: 'room-read-local',
  /**
   * After health, a cold start's measure (measureOwnProcesses: docker top and an nvidia-smi listing)
   * runs beside its identity check instead of after it, and its start slot's give beside the steps
   * that follow the measure (the tier's readmit, `running`): none of them reads what the other
   * changes. The steps' records keep their order (identity, measure, readmit, running). Asked by
   * every cold start that measures since. Before: every other recording; after:
   * eviction-room-local.json (the same acquisition).
   */
  readyStepsOverlapped: 'ready-steps-overlapped',
  /**
   * A run refused the start slot names itself in its take (`wake`), and the ledger signals it
   * (startSlotFreed) when the slot is given back: it asks again then, not at its next poll (1, 2,
   * 4, then every 5 s), which kept every start or stop queued behind another up to 5 s idle (15
   * serves brought down at once took 15 polls). The polls stay, as the fallback for a signal lost
   * (the ledger keeps its waiters in memory, not across its continue-as-new). Asked by the waiter
   * at each take, and by the ledger where it signals. Before: every other recording; after:
   * start-slot-woken.json and ledger-slot-woken.json (recorded by test/start-slot.test.ts with
   * GPURES_SAVE_HISTORIES=DIR).
   */
  slotFreedSignal: 'slot-freed-signal',
  /**
   * A bring-down's take answers with the ledger before and after it (answerLedger), which gives
   * its ledgerBefore: the snapshot read before the take (a query, one round trip) is not made. A
   * serve with no tier to drain takes the stop's start slot in the same Update (stopSlot), where
   * it took it by a startSlot Update of its own after the take; held by another run, the take
   * still answers taken, and the slot is waited for as before. Asked by every bring-down since.
   * Before: every other recording; after: stop-slot-with-take.json (recorded by
   * test/start-slot.test.ts with GPURES_SAVE_HISTORIES=DIR).
   */
  takeAnswers: 'take-answers',
  /**
   * A bring-down's reading before its stop (readBeforeStop: the GPU and the serve's own processes,
   * one attempt, 30 s) runs as a local activity in the workflow task that reached it, as readGpu
   * does (proxies.ts readsOnce()): no dispatch, and no workflow task of its own before the stop is
   * scheduled. Asked by every bring-down that holds the start slot to stop since. Before: every
   * other recording; after: stop-slot-with-take.json (the same bring-down).
   */
  readBeforeStopLocal: 'read-before-stop-local',
  /**
   * A bring-up's admission takes the GPU's start slot in the same Update where it admits a serve to
   * start cold (ledger admit's `startSlot`): one round trip fewer. Held by another run, the run
   * waits for it as before (its takes from the first); a sleeper's restore takes it by its own.
   * Before: every other recording; after: bring-up-slot-with-admit.json (recorded by
   * test/histories/record.ts: ocr, with no router tier).
   */
  admitTakesSlot: 'admit-takes-slot',
  /**
   * A start whose serve has no router tier to readmit gives its start slot back by its `running`
   * (setPhase's `giveStartSlot`) instead of an Update of its own beside it. A serve with a tier
   * gives it before (or beside) the readmit as before: its slot is not held through the router's
   * checks. Before: every other recording; after: bring-up-slot-with-admit.json.
   */
  slotGivenWithRunning: 'slot-given-with-running',
  /**
   * The ledger tells one waiter when the start slot is given back, the longest waiting, where it
   * told every waiter (each asked again at once: 14 Updates for one winner with 15 queued). A
   * waiter told that finds another asker was first keeps its place; one told that does not ask
   * before the next give (its run ended) loses it, and one whose signal fails (its run has closed)
   * passes the turn at once. The waiters are carried across the ledger's continue-as-new (its
   * input's slotWaiters). Asked by the ledger where it tells, and where a waiter takes the slot.
   * Before: every other recording (ledger-slot-woken.json tells every waiter); after:
   * ledger-slot-wakes-first.json and ledger-slot-waiters-carried.json (recorded by
   * test/ledger-slot-waiters.test.ts with GPURES_SAVE_HISTORIES=DIR).
   */
  slotWakesFirst: 'slot-wakes-first',
  /**
   * A told run that has not taken the start slot within SLOT_TOLD_ASK_MS (1 s) of being told, the
   * slot still free, has the next waiter told too, and so on one a bound (a timer in the ledger,
   * cancelled once the slot is taken): a run alive but not asking kept the slot free until some
   * waiter's poll, up to 5 s a give. A told run silent keeps its place, told again at the next give;
   * told twice without asking, it is dropped; one that asks late and finds the slot taken keeps
   * its place. A continuation with the slot free tells its carried waiters at once (their counts
   * of tells without asking carried with them). Asked by the ledger where it tells, and at a
   * continuation's start where its slot is free and waiters were carried. Before: every other
   * recording (ledger-slot-wakes-first.json and ledger-slot-waiters-carried.json pass a silent
   * waiter over at the next give); after: ledger-slot-told-bounded.json and
   * ledger-slot-told-carried.json (recorded by test/ledger-slot-waiters.test.ts with
   * GPURES_SAVE_HISTORIES=DIR).
   */
  slotToldBounded: 'slot-told-bounded',
} as const;
export type PatchId = (typeof PATCHES)[keyof typeof PATCHES];
