package main

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestCacheOptionsWatchNamespaces(t *testing.T) {
	for in, want := range map[string][]string{
		"":                       nil,
		" , ":                    nil,
		"team-a":                 {"team-a"},
		" team-a,team-b ,team-a": {"team-a", "team-b"},
	} {
		o, err := cacheOptions(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		got := slices.Sorted(maps.Keys(o.DefaultNamespaces))
		if !slices.Equal(got, want) {
			t.Errorf("%q: namespaces %q, want %q", in, got, want)
		}
		// The pod label selector (only our pods) stays, in every namespace.
		found := false
		for obj, by := range o.ByObject {
			if _, ok := obj.(*corev1.Pod); ok && by.Label != nil && !by.Label.Empty() {
				found = true
			}
		}
		if !found {
			t.Errorf("%q: the pod label selector is gone", in)
		}
	}
	for _, bad := range []string{"Team-A", "a/b", "team_a"} {
		if _, err := cacheOptions(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
