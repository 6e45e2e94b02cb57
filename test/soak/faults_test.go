package soak

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPlanFaultsIsASeededScheduleOfOverlappingFaults(t *testing.T) {
	const ttl = 6 * time.Second
	for _, p := range []struct {
		name  string
		plan  func(seed int64, d, ttl time.Duration) []Fault
		kinds []FaultKind
		short time.Duration // the length `make test` runs it for
	}{
		{"cluster soak", PlanFaults, FaultKinds, 4 * time.Minute},
		{"Sentinel soak", PlanSentinelFaults, SentinelFaultKinds, 3 * time.Minute},
	} {
		t.Run(p.name, func(t *testing.T) {
			const d = 40 * time.Minute
			a, b := p.plan(7, d, ttl), p.plan(7, d, ttl)
			if !slices.Equal(a, b) {
				t.Fatal("the same seed gave two plans")
			}
			if slices.Equal(a, p.plan(8, d, ttl)) {
				t.Fatal("another seed gave the same plan")
			}
			kinds := map[FaultKind]int{}
			overlapping, pastTTL := 0, 0
			for i, f := range a {
				kinds[f.Kind]++
				if !slices.Contains(p.kinds, f.Kind) {
					t.Fatalf("fault %d: %s is not one of this soak's kinds", i, f.Kind)
				}
				if f.At < 20*time.Second || f.At > d-30*time.Second {
					t.Fatalf("fault %d at %v: outside the soak's middle", i, f.At)
				}
				if i > 0 && a[i-1].At+a[i-1].For > f.At {
					overlapping++
				}
				if f.For > ttl {
					pastTTL++
				}
			}
			for _, k := range p.kinds {
				if kinds[k] == 0 {
					t.Errorf("no %s in a 40-minute plan: %v", k, kinds)
				}
			}
			short := p.plan(7, p.short, ttl)
			for _, k := range p.kinds {
				if !slices.ContainsFunc(short, func(f Fault) bool { return f.Kind == k }) {
					t.Errorf("no %s in a %v plan: %v", k, p.short, short)
				}
			}
			if overlapping == 0 || pastTTL == 0 {
				t.Errorf("overlapping %d, longer than the TTL %d: want some of each", overlapping, pastTTL)
			}
		})
	}
}

// The first round of faults (one of each kind) has the cluster-wide kinds last: a kind that
// needs a target (a holder pod) planned only behind three kube-apiserver restarts found none
// in a 4-minute soak (seed 402969939).
func TestFirstRoundEndsWithTheClusterWideKinds(t *testing.T) {
	for seed := int64(0); seed < 200; seed++ {
		plan := PlanFaults(seed, 4*time.Minute, 6*time.Second)
		if len(plan) < len(FaultKinds) {
			t.Fatalf("seed %d: %d faults in 4 minutes", seed, len(plan))
		}
		seen := false
		for _, f := range plan[:len(FaultKinds)] {
			switch {
			case clusterWide(f.Kind) == 1:
				seen = true
			case seen:
				t.Fatalf("seed %d: %s planned after a cluster-wide fault in the first round: %v", seed, f.Kind, plan[:len(FaultKinds)])
			}
		}
	}
}

// A soak whose planned kind never found anything to hit (a holder pod, a running job)
// passed without exercising it; FaultsMissing names such kinds, and untilHit makes a fault
// wait for a target rather than being dropped.
func TestFaultsThatNeverLandedAreNamed(t *testing.T) {
	plan := []Fault{{Kind: FaultHolderPodDeleted}, {Kind: FaultHolderPodDeleted}, {Kind: FaultJobKill9}, {Kind: FaultRedisRestart}}
	if got := FaultsMissing(plan, map[FaultKind]int{FaultJobKill9: 1, FaultRedisRestart: 2}); !slices.Equal(got, []string{"holder-pod-deleted (planned 2 times)"}) {
		t.Errorf("missing %q", got)
	}
	if got := FaultsMissing(plan, map[FaultKind]int{FaultJobKill9: 1, FaultRedisRestart: 1, FaultHolderPodDeleted: 1}); len(got) != 0 {
		t.Errorf("missing %q with every kind landed", got)
	}

	tries := 0
	if note := untilHit(time.Now().Add(time.Minute), func() string {
		if tries++; tries < 3 {
			return ""
		}
		return "hit"
	}); note != "hit" || tries != 3 {
		t.Errorf("untilHit: %q after %d tries, want a hit at the third", note, tries)
	}
	if note := untilHit(time.Now(), func() string { return "" }); note != "" {
		t.Errorf("untilHit past its deadline: %q", note)
	}
}

func TestMinOccurrencesMustBeSet(t *testing.T) {
	for _, v := range []string{"", "x", "0", "-3"} {
		t.Setenv("SOAK_MIN_OCCURRENCES", v)
		if _, err := MinOccurrences(); err == nil || !strings.Contains(err.Error(), "SOAK_MIN_OCCURRENCES") {
			t.Errorf("%q: %v", v, err)
		}
	}
	t.Setenv("SOAK_MIN_OCCURRENCES", "75")
	if n, err := MinOccurrences(); n != 75 || err != nil {
		t.Errorf("75: %d %v", n, err)
	}
}
