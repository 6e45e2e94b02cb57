// Package config is lockwrap's command-line and environment contract: every flag, the
// LOCKEDCRON_* variable that sets it, and their parsing. The controller imports the names
// to build pods; lockwrap imports the parser.
package config

// Environment variables read by lockwrap; a flag of the same meaning wins over them.
const (
	EnvRedisURL        = "LOCKEDCRON_REDIS_URL"         // --redis-url
	EnvRedisUsername   = "LOCKEDCRON_REDIS_USERNAME"    // --redis-username
	EnvRedisPassword   = "LOCKEDCRON_REDIS_PASSWORD"    // environment only, never a flag (argv is visible in ps)
	EnvRedisCACert     = "LOCKEDCRON_REDIS_CA_CERT"     // PEM text of the CA (from the Secret's ca.crt)
	EnvRedisCAFile     = "LOCKEDCRON_REDIS_CA_FILE"     // --redis-ca-file, a PEM file
	EnvKey             = "LOCKEDCRON_LOCK_KEY"          // --key
	EnvTTL             = "LOCKEDCRON_LOCK_TTL"          // --ttl
	EnvRenewInterval   = "LOCKEDCRON_RENEW_INTERVAL"    // --renew-interval
	EnvOccurrence      = "LOCKEDCRON_OCCURRENCE"        // --occurrence (RFC 3339); also given to the child
	EnvHolder          = "LOCKEDCRON_HOLDER"            // --holder; also given to the child
	EnvContention      = "LOCKEDCRON_CONTENTION"        // --contention skip|retry
	EnvRetryAttempts   = "LOCKEDCRON_RETRY_ATTEMPTS"    // --retry-attempts
	EnvRetryBackoff    = "LOCKEDCRON_RETRY_BACKOFF"     // --retry-backoff
	EnvRetryMaxBackoff = "LOCKEDCRON_RETRY_MAX_BACKOFF" // --retry-max-backoff
	EnvRetryDeadline   = "LOCKEDCRON_RETRY_DEADLINE"    // --retry-deadline (RFC 3339 instant; from startingDeadlineSeconds)
	EnvOnLost          = "LOCKEDCRON_ON_LOST"           // --on-lost terminate|continue
	EnvKillGrace       = "LOCKEDCRON_KILL_GRACE"        // --kill-grace, SIGTERM→SIGKILL grace on a lost lock
	EnvMinReplicas     = "LOCKEDCRON_MIN_REPLICAS"      // --min-replicas
	EnvDedupeRetention = "LOCKEDCRON_DEDUPE_RETENTION"  // --dedupe-retention
	EnvTerminationLog  = "LOCKEDCRON_TERMINATION_LOG"   // --termination-log
	// EnvNotAfter: --not-after (RFC 3339 instant): a run that has not started its job by
	// then does not start it (outcome Missed, exit 0). The controller passes the earlier
	// of occurrence + startingDeadlineSeconds and the next blackout start.
	EnvNotAfter = "LOCKEDCRON_NOT_AFTER"
	// EnvNotBefore: --not-before (RFC 3339 instant, fractions of a second allowed): lockwrap
	// neither contacts Redis nor starts the command before this instant on the host's
	// clock. The controller passes the occurrence to a pod it created ahead of it
	// (spec.prepareAheadSeconds).
	EnvNotBefore = "LOCKEDCRON_NOT_BEFORE"

	// EnvRedisAllowedHosts: --redis-allowed-hosts, the endpoints lockwrap may dial
	// (lock.ParseAllowedHosts; the controller passes its own --redis-allowed-hosts).
	EnvRedisAllowedHosts = "LOCKEDCRON_REDIS_ALLOWED_HOSTS"

	// EnvHolderInstance: --holder-instance, the last part of --holder that tells apart
	// processes made again under one name (the controller: the pod's UID, holder
	// "<cluster>/<namespace>/<pod>/<uid>", scheduled pods only). An earlier holder of the
	// same name with another instance that failed the occurrence (its ledger entry)
	// suppresses it: the controller makes one pod name per scheduled occurrence, and a pod
	// made again under it (by a controller that resumed after another one ran the
	// occurrence and pruned the pod) must not run it twice.
	EnvHolderInstance = "LOCKEDCRON_HOLDER_INSTANCE"

	// EnvRunID: --run-id, a ledger entry of the run's own instead of the occurrence's
	// (the controller sets it for a manual run that names no occurrence).
	EnvRunID = "LOCKEDCRON_RUN_ID"

	// EnvBlackoutID and EnvMadeAt: --blackout-id and --made-at, the run's job (its UID)
	// and when the controller made the run (RFC 3339, the controller's clock). The lock is
	// not granted while the job's blackout marker says a blackout began after that
	// (lock.SetBlackout): a run waiting for the lock when a rollout begins does not start
	// its job in it, and is counted missed. Both or neither.
	EnvBlackoutID = "LOCKEDCRON_BLACKOUT_ID"
	EnvMadeAt     = "LOCKEDCRON_MADE_AT"

	// EnvReportMaxBytes: --report-max-bytes, the most the report takes (report.MinBytes to
	// report.MaxBytes, the default). The kubelet keeps of each container's termination
	// message its share of 12 KiB, 12288 / (the pod's containers and init containers): the
	// controller passes that share when it is smaller.
	EnvReportMaxBytes = "LOCKEDCRON_REPORT_MAX_BYTES"

	// EnvWatermarkMonotonic: --watermark-monotonic (true|false).
	EnvWatermarkMonotonic = "LOCKEDCRON_WATERMARK_MONOTONIC"

	// EnvBackoffLimit and EnvAttemptsDir: --backoff-limit and --attempts-dir. With a limit,
	// lockwrap counts its starts in a file in the directory (an emptyDir of the pod: it
	// outlives a container restarted by restartPolicy OnFailure), and a start past
	// limit+1 runs nothing: it reports that the limit was reached and exits 0, so that the
	// kubelet stops restarting it (the controller passes spec.backoffLimit).
	EnvBackoffLimit = "LOCKEDCRON_BACKOFF_LIMIT"
	EnvAttemptsDir  = "LOCKEDCRON_ATTEMPTS_DIR"

	// EnvRunMark is the prefix of a variable set for the child only, named for the run:
	// EnvRunMark + "_" + 32 random hex digits, "=1". Every process that carries it in its
	// environment is the run's, and is killed before the run is recorded and the lock
	// released, whatever group or session it moved to. The name, not the value, holds the
	// mark, so that a lockwrap run by the command keeps its runner's mark beside its own.
	EnvRunMark = "LOCKEDCRON_RUN_MARK"

	// EnvFencingToken is set for the child only: the token lockwrap acquired.
	EnvFencingToken = "LOCKEDCRON_FENCING_TOKEN"

	// Set for the child only: the key's last successful run (when there is one) and where
	// to write a new watermark.
	EnvLastSuccessOccurrence = "LOCKEDCRON_LAST_SUCCESS_OCCURRENCE" // RFC 3339
	EnvLastSuccessAt         = "LOCKEDCRON_LAST_SUCCESS_AT"         // RFC 3339 with ms
	EnvLastSuccessFence      = "LOCKEDCRON_LAST_SUCCESS_FENCING_TOKEN"
	EnvWatermark             = "LOCKEDCRON_WATERMARK"      // the key's watermark, when there is one
	EnvWatermarkFile         = "LOCKEDCRON_WATERMARK_FILE" // a file the command may write the next one to
)
