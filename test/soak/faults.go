package soak

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"time"
)

// FaultKind names one kind of fault the soak injects.
type FaultKind string

const (
	// FaultHolderPodDeleted deletes the pod holding the lock (waiting, until the faults
	// end, for a moment a pod holds it: not while the host loop does).
	FaultHolderPodDeleted FaultKind = "holder-pod-deleted"
	// FaultJobKill9 SIGKILLs a running job process on the host (a pod's or the host loop's).
	FaultJobKill9 FaultKind = "job-kill-9"
	// FaultLockwrapStopped SIGSTOPs the host loop's lockwrap (its whole process group, as a
	// paused VM) past the lock's TTL, then SIGCONTs it.
	FaultLockwrapStopped FaultKind = "lockwrap-sigstop"
	// FaultRedisRestart SIGKILLs the lock's Redis and starts it again (AOF, fsync always).
	FaultRedisRestart FaultKind = "redis-restart"
	// FaultRedisStall SIGSTOPs the lock's Redis for a while: every contender stalls.
	FaultRedisStall FaultKind = "redis-stall"
	// FaultNetworkCut freezes the proxy between the host loop and Redis: one contender's
	// link stalls while the others go on.
	FaultNetworkCut FaultKind = "network-cut-host"
	// FaultNetworkToxic puts a Toxiproxy toxic on the host loop's link to Redis: latency,
	// a silent connection closed after a while (timeout), or connections reset (reset_peer).
	FaultNetworkToxic FaultKind = "network-toxic-host"
	// FaultOperatorDeleted deletes the operator's pod.
	FaultOperatorDeleted FaultKind = "operator-pod-deleted"
	// FaultAPIServerRestart stops kube-apiserver and starts it again with the same flags.
	FaultAPIServerRestart FaultKind = "apiserver-restart"

	// The Sentinel soak's (TestSentinelSoak), on a master, two replicas and three sentinels:

	// FaultSentinelFailover asks the sentinels for a failover (SENTINEL FAILOVER): the
	// master is demoted once a replica has caught up, and that replica promoted.
	FaultSentinelFailover FaultKind = "sentinel-failover"
	// FaultMasterKilled SIGKILLs the master; once the sentinels have promoted a replica, it
	// is started again (empty: no persistence) and the sentinels make it a replica.
	FaultMasterKilled FaultKind = "master-kill"
	// FaultMasterFrozen SIGSTOPs the master for a while: past the sentinels' down-after
	// (1 s) they promote a replica while the old master, thawed, still answers those
	// connected to it until the sentinels demote it.
	FaultMasterFrozen FaultKind = "master-sigstop"
	// FaultReplicaFrozen SIGSTOPs a replica: WAIT counts one acknowledgement fewer.
	FaultReplicaFrozen FaultKind = "replica-sigstop"
)

// FaultKinds lists the kinds in the order the summary shows them.
var FaultKinds = []FaultKind{FaultHolderPodDeleted, FaultJobKill9, FaultLockwrapStopped, FaultRedisRestart,
	FaultRedisStall, FaultNetworkCut, FaultNetworkToxic, FaultOperatorDeleted, FaultAPIServerRestart}

// Fault is one planned fault: At after the soak's start, lasting For (stalls, cuts, stops).
type Fault struct {
	At   time.Duration
	Kind FaultKind
	For  time.Duration
}

// weights of the kinds: the cheap, local faults often; the cluster-wide ones rarely.
var weights = map[FaultKind]int{
	FaultHolderPodDeleted: 6, FaultJobKill9: 6, FaultLockwrapStopped: 4, FaultRedisRestart: 3,
	FaultRedisStall: 4, FaultNetworkCut: 3, FaultNetworkToxic: 3, FaultOperatorDeleted: 2, FaultAPIServerRestart: 1,
}

// SentinelFaultKinds lists the Sentinel soak's kinds in the order its summary shows them.
var SentinelFaultKinds = []FaultKind{FaultSentinelFailover, FaultMasterKilled, FaultMasterFrozen, FaultReplicaFrozen,
	FaultJobKill9, FaultLockwrapStopped}

var sentinelWeights = map[FaultKind]int{
	FaultSentinelFailover: 3, FaultMasterKilled: 3, FaultMasterFrozen: 3, FaultReplicaFrozen: 3,
	FaultJobKill9: 4, FaultLockwrapStopped: 3,
}

// PlanSentinelFaults is PlanFaults for the Sentinel soak's kinds.
func PlanSentinelFaults(seed int64, d, ttl time.Duration) []Fault {
	return planFaults(seed, d, ttl, SentinelFaultKinds, sentinelWeights)
}

// PlanFaults draws the fault schedule of a soak of length d from seed: a fault every
// 3–15 s (so that several overlap), from 20 s after the start to 30 s before the end,
// each with a duration of 1 s to 2.5 × ttl (beyond the lock's TTL about half the time).
// The first faults are one of each kind, in a seeded order, so that even a short soak
// has every kind. The same seed gives the same plan.
func PlanFaults(seed int64, d, ttl time.Duration) []Fault {
	return planFaults(seed, d, ttl, FaultKinds, weights)
}

func planFaults(seed int64, d, ttl time.Duration, kinds []FaultKind, weights map[FaultKind]int) []Fault {
	r := rand.New(rand.NewPCG(uint64(seed), 0x50a4))
	first := slices.Clone(kinds)
	r.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	// The cluster-wide kinds last in the first round: a kube-apiserver restart or a deleted
	// operator keeps pods from starting for a while, and a kind that needs a target (a holder
	// pod) planned only behind them found none (seed 402969939: three restarts kept every pod
	// from starting for the rest of a 4-minute soak, and it failed for a kind never landed).
	slices.SortStableFunc(first, func(a, b FaultKind) int { return cmp.Compare(clusterWide(a), clusterWide(b)) })
	total := 0
	for _, k := range kinds {
		total += weights[k]
	}
	var out []Fault
	for at := 20 * time.Second; ; {
		at += 3*time.Second + time.Duration(r.Int64N(int64(12*time.Second)))
		if at > d-30*time.Second {
			return out
		}
		n := r.IntN(total)
		var kind FaultKind
		for _, k := range kinds {
			if n < weights[k] {
				kind = k
				break
			}
			n -= weights[k]
		}
		if len(out) < len(first) {
			kind = first[len(out)]
		}
		dur := time.Second + time.Duration(r.Int64N(int64(ttl*5/2-time.Second)))
		out = append(out, Fault{At: at, Kind: kind, For: dur.Round(100 * time.Millisecond)})
	}
}

// clusterWide is 1 for the kinds that stop the whole cluster's work for a while, 0 for the
// others.
func clusterWide(k FaultKind) int {
	if k == FaultAPIServerRestart || k == FaultOperatorDeleted {
		return 1
	}
	return 0
}

// FaultsMissing names the kinds planned that never landed (landed holds the count of each
// kind that found something to hit): a soak that passes without one of its kinds did not
// exercise it. Empty when each landed at least once.
func FaultsMissing(planned []Fault, landed map[FaultKind]int) []string {
	times := map[FaultKind]int{}
	for _, f := range planned {
		times[f.Kind]++
	}
	var out []string
	for k, n := range times {
		if landed[k] == 0 {
			out = append(out, fmt.Sprintf("%s (planned %d times)", k, n))
		}
	}
	slices.Sort(out)
	return out
}

// untilHit calls try every 200 ms until it finds something to hit (a non-empty note) or
// deadline passes: a fault that needs a target (a pod holding the lock, a running job)
// waits for one rather than being dropped, so that each planned kind lands.
func untilHit(deadline time.Time, try func() string) string {
	for {
		if note := try(); note != "" || !time.Now().Before(deadline) {
			return note
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// MinOccurrences reads SOAK_MIN_OCCURRENCES, the contended occurrences a soak must have
// seen; an error when it is not set to a positive number (a soak run without it proved
// nothing about how much it did).
func MinOccurrences() (int, error) {
	v := os.Getenv("SOAK_MIN_OCCURRENCES")
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("SOAK_MIN_OCCURRENCES=%q: set it to the least number of contended occurrences the soak must see (make soak sets it)", v)
	}
	return n, nil
}
