// Package audit is the record format of the end-to-end job program (test/e2e/jobimage) and the
// helpers a test needs to read it back: every run RPUSHes a "start" record and, unless it is
// killed outright, an "end" record onto the Redis list List.
package audit

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// List is the Redis list every run of the job image appends to.
const List = "lockedcron-e2e:audit"

// Record is one entry of List.
type Record struct {
	Event        string    `json:"event"` // "start" | "end"
	Occurrence   string    `json:"occurrence"`
	Holder       string    `json:"holder"`
	FencingToken int64     `json:"fencingToken"`
	Start        time.Time `json:"start"`
	End          time.Time `json:"end,omitzero"`
	ExitCode     int       `json:"exitCode,omitempty"`
	Signal       string    `json:"signal,omitempty"` // set when SIGTERM/SIGINT ended the run
	Pod          string    `json:"pod,omitempty"`
	Namespace    string    `json:"namespace,omitempty"`
	Label        string    `json:"label,omitempty"`
}

// Run is one execution of the job: its start record joined with its end record, if any.
type Run struct {
	Record
	Finished bool // an end record was seen
}

// Parse decodes the raw entries of List (as LRANGE returns them).
func Parse(entries []string) ([]Record, error) {
	out := make([]Record, 0, len(entries))
	for i, e := range entries {
		var r Record
		if err := json.Unmarshal([]byte(e), &r); err != nil {
			return nil, fmt.Errorf("audit entry %d: %w", i, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Runs pairs start and end records (by pod, occurrence, fencing token and start time) and returns
// the runs ordered by start time. A run without an end record has Finished false.
func Runs(records []Record) []Run {
	type key struct {
		pod, ns, occ string
		token        int64
		start        int64
	}
	idx := map[key]int{}
	var runs []Run
	for _, r := range records {
		k := key{r.Pod, r.Namespace, r.Occurrence, r.FencingToken, r.Start.UnixNano()}
		i, ok := idx[k]
		if !ok {
			idx[k] = len(runs)
			runs = append(runs, Run{Record: r})
			i = len(runs) - 1
		}
		if r.Event == "end" {
			runs[i].Record = r
			runs[i].Event = "end"
			runs[i].Finished = true
		}
	}
	sort.SliceStable(runs, func(a, b int) bool { return runs[a].Start.Before(runs[b].Start) })
	return runs
}

// Overlaps returns every pair of runs whose [Start, End] intervals intersect; an unfinished run is
// taken to last until now.
func Overlaps(runs []Run, now time.Time) [][2]Run {
	end := func(r Run) time.Time {
		if r.Finished {
			return r.End
		}
		return now
	}
	var out [][2]Run
	for i := range runs {
		for j := i + 1; j < len(runs); j++ {
			if runs[j].Start.Before(end(runs[i])) && runs[i].Start.Before(end(runs[j])) {
				out = append(out, [2]Run{runs[i], runs[j]})
			}
		}
	}
	return out
}

// ByOccurrence groups runs by their occurrence.
func ByOccurrence(runs []Run) map[string][]Run {
	m := map[string][]Run{}
	for _, r := range runs {
		m[r.Occurrence] = append(m[r.Occurrence], r)
	}
	return m
}
