package audit

import (
	"encoding/json"
	"testing"
	"time"
)

func TestRunsAndOverlaps(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := func(ev, pod string, token int64, start, end time.Duration) string {
		r := Record{Event: ev, Occurrence: "occ-" + pod, Holder: "c/ns/" + pod, FencingToken: token, Start: t0.Add(start), Pod: pod}
		if ev == "end" {
			r.End = t0.Add(end)
		}
		b, _ := json.Marshal(r)
		return string(b)
	}
	entries := []string{
		rec("start", "a", 1, 0, 0), rec("end", "a", 1, 0, 2*time.Second),
		rec("start", "b", 2, 5*time.Second, 0), rec("end", "b", 2, 5*time.Second, 7*time.Second),
		rec("start", "c", 3, 6*time.Second, 0), // killed: no end
	}
	recs, err := Parse(entries)
	if err != nil {
		t.Fatal(err)
	}
	runs := Runs(recs)
	if len(runs) != 3 || !runs[0].Finished || !runs[1].Finished || runs[2].Finished {
		t.Fatalf("runs = %+v", runs)
	}
	ov := Overlaps(runs, t0.Add(10*time.Second))
	if len(ov) != 1 || ov[0][0].Pod != "b" || ov[0][1].Pod != "c" {
		t.Fatalf("overlaps = %+v", ov)
	}
	if got := len(ByOccurrence(runs)); got != 3 {
		t.Fatalf("ByOccurrence: %d groups", got)
	}
	if _, err := Parse([]string{"{"}); err == nil {
		t.Fatal("Parse accepted bad JSON")
	}
}
