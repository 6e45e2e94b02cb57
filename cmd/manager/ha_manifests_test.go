package main

import (
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// The manager installs highly available: two replicas electing a leader, spread over
// nodes where there are several, a PodDisruptionBudget leaving one up during drains, and
// lease timings a standby can take over within.
func TestManagerDeploymentIsHighlyAvailable(t *testing.T) {
	dep := managerDeployment(t)
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas < 2 {
		t.Errorf("replicas %v, want 2 or more", dep.Spec.Replicas)
	}
	podLabels := labels.Set(dep.Spec.Template.Labels)

	a := dep.Spec.Template.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		t.Fatal("no preferred pod anti-affinity")
	}
	term := a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
	sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
	if err != nil {
		t.Fatal(err)
	}
	if term.TopologyKey != "kubernetes.io/hostname" || !sel.Matches(podLabels) {
		t.Errorf("anti-affinity %s on %s does not spread the manager's own pods (%v) over nodes", sel, term.TopologyKey, podLabels)
	}

	var pdb policyv1.PodDisruptionBudget
	if err := yaml.Unmarshal(docs(t, "config", "manager", "pdb.yaml")[0], &pdb); err != nil {
		t.Fatal(err)
	}
	pdbSel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if !pdbSel.Matches(podLabels) {
		t.Errorf("PodDisruptionBudget selector %s misses the manager's pods %v", pdbSel, podLabels)
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
	}

	// The arguments parse as the manager's flags, with leader election on and the
	// timings in the order client-go requires.
	args := dep.Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--leader-elect") {
		t.Errorf("args %q: no --leader-elect", args)
	}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	lease := fs.Duration("leader-election-lease-duration", 0, "")
	renew := fs.Duration("leader-election-renew-deadline", 0, "")
	retry := fs.Duration("leader-election-retry-period", 0, "")
	var le []string
	for _, a := range args {
		if strings.HasPrefix(a, "--leader-election-") {
			le = append(le, a)
		}
	}
	if err := fs.Parse(le); err != nil {
		t.Fatal(err)
	}
	if !(*retry > 0 && *retry < *renew && *renew < *lease && *lease <= 20*time.Second) {
		t.Errorf("leader election retry %s < renew %s < lease %s <= 20s does not hold", *retry, *renew, *lease)
	}
}
