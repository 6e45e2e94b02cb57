package runpod

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestTemplateMetadataCannotForgeTheControllersKeys: template labels and annotations reach
// the pod, but never one of the controller's own keys (a forged counted=true label would
// make the pod's report never counted and the pod pruned).
func TestTemplateMetadataCannotForgeTheControllersKeys(t *testing.T) {
	job := nightly()
	job.Spec.Template.Labels = map[string]string{
		"app": "ledger", LabelCounted: "true", LabelJob: "someone-else", ReservedPrefix + "other": "x",
	}
	job.Spec.Template.Annotations = map[string]string{
		"prometheus.io/scrape": "true", AnnotationScheduledTime: "1999-01-01T00:00:00Z", AnnotationWrappedContainer: "sidecar",
	}
	occ := time.Unix(1764468000, 0)
	pod, err := Build(job, occ, opts)
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{"app": "ledger", LabelJob: "nightly"}
	if d := cmp.Diff(wantLabels, pod.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	if got := pod.Annotations["prometheus.io/scrape"]; got != "true" {
		t.Errorf("template annotation not copied: %v", pod.Annotations)
	}
	if got := pod.Annotations[AnnotationScheduledTime]; got != occ.UTC().Format(time.RFC3339) {
		t.Errorf("scheduled-time %q", got)
	}
	if got := pod.Annotations[AnnotationWrappedContainer]; got != "job" {
		t.Errorf("wrapped-container %q", got)
	}
}
