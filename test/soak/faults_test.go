package soak

import (
	"slices"
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
