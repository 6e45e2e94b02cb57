package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockedcron/lockedcron/internal/invalidinput"
)

// TestSharedInvalidInputs: every input the CRD rejects at admission, lockwrap's parser
// rejects too, naming the flag (the envtest suite walks the same table against the CRD).
func TestSharedInvalidInputs(t *testing.T) {
	base := []string{"--redis-url", "redis://127.0.0.1:6379", "--key", "k", "--occurrence", "2026-11-30T06:00:00Z"}
	// The base line is valid.
	if _, _, err := parseAt(append(append([]string{}, base...), "--", "true"), nil, now); err != nil {
		t.Fatalf("base: %v", err)
	}
	for _, c := range invalidinput.Cases {
		t.Run(c.Name, func(t *testing.T) {
			args := append(append(append([]string{}, base...), c.Flags...), "--", "true")
			_, _, err := parseAt(args, nil, now)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("%v: accepted (err %v)", c.Flags, err)
			}
			if ce.Flag != c.Flag || !strings.Contains(ce.Msg, c.FlagMessage) {
				t.Fatalf("%v: error %q, want flag %s and %q", c.Flags, err, c.Flag, c.FlagMessage)
			}
		})
	}
}
