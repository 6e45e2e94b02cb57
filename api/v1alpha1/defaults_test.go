package v1alpha1_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/lockedcron/lockedcron/internal/defaults"
)

// loadCRD reads the CRD that make manifests generates.
func loadCRD(tb testing.TB) *apiextensionsv1.CustomResourceDefinition {
	tb.Helper()
	b, err := os.ReadFile("../../config/crd/bases/scheduling.lockedcron.io_lockedcronjobs.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		tb.Fatal(err)
	}
	return &crd
}

// TestCRDMarkersMatch pins the defaults written in the CRD (from the +kubebuilder:default
// markers) to internal/defaults, the one source lockwrap and the controller use.
func TestCRDMarkersMatch(t *testing.T) {
	crd := loadCRD(t)
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	prop := func(path ...string) apiextensionsv1.JSONSchemaProps {
		p := spec
		for _, n := range path {
			next, ok := p.Properties[n]
			if !ok {
				t.Fatalf("CRD has no spec.%v", path)
			}
			p = next
		}
		return p
	}
	for _, c := range []struct {
		path []string
		want time.Duration
	}{
		{[]string{"lock", "ttl"}, defaults.TTL},
		{[]string{"lock", "killGracePeriod"}, defaults.KillGracePeriod},
		{[]string{"contention", "retry", "backoff"}, defaults.RetryBackoff},
		{[]string{"contention", "retry", "maxBackoff"}, defaults.RetryMaxBackoff},
		{[]string{"dedupe", "retention"}, defaults.DedupeRetention},
	} {
		p := prop(c.path...)
		if p.Default == nil {
			t.Errorf("spec.%v: no default in the CRD", c.path)
			continue
		}
		var s string
		if err := json.Unmarshal(p.Default.Raw, &s); err != nil {
			t.Fatalf("spec.%v: default %s: %v", c.path, p.Default.Raw, err)
		}
		got, err := time.ParseDuration(s)
		if err != nil || got != c.want {
			t.Errorf("spec.%v: CRD default %q, internal/defaults says %v", c.path, s, c.want)
		}
		// metav1.Duration writes time.Duration.String(): a default written otherwise
		// ("168h") comes back from any typed client's full update as another string, a
		// spec change (metadata.generation moves; the admission policy checks the author).
		if err == nil && s != got.String() {
			t.Errorf("spec.%v: CRD default %q is not how a Go client writes it back (%q)", c.path, s, got.String())
		}
	}
	if max := prop("startingDeadlineSeconds").Maximum; max == nil || int64(*max) != defaults.MaxStartingDeadlineSeconds {
		t.Errorf("startingDeadlineSeconds maximum %v, want %d", max, defaults.MaxStartingDeadlineSeconds)
	}
	if ml := prop("lock", "key").MaxLength; ml == nil || *ml != defaults.MaxKeyLength {
		t.Errorf("lock.key maxLength %v, want %d", ml, defaults.MaxKeyLength)
	}
}
