package soak

import (
	"slices"
	"testing"
	"time"
)

func TestPlanFaultsIsASeededScheduleOfOverlappingFaults(t *testing.T) {
	const d, ttl = 40 * time.Minute, 6 * time.Second
	a, b := PlanFaults(7, d, ttl), PlanFaults(7, d, ttl)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed gave two plans")
	}
	if slices.Equal(a, PlanFaults(8, d, ttl)) {
		t.Fatal("another seed gave the same plan")
	}
	kinds := map[FaultKind]int{}
	overlapping, pastTTL := 0, 0
	for i, f := range a {
		kinds[f.Kind]++
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
	for _, k := range FaultKinds {
		if kinds[k] == 0 {
			t.Errorf("no %s in a 40-minute plan: %v", k, kinds)
		}
	}
	short := PlanFaults(7, 4*time.Minute, ttl)
	for _, k := range FaultKinds {
		if !slices.ContainsFunc(short, func(f Fault) bool { return f.Kind == k }) {
			t.Errorf("no %s in a 4-minute plan: %v", k, short)
		}
	}
	if overlapping == 0 || pastTTL == 0 {
		t.Errorf("overlapping %d, longer than the TTL %d: want some of each", overlapping, pastTTL)
	}
}
