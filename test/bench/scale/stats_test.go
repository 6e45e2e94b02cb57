package main

import (
	"maps"
	"testing"
	"time"
)

func TestSummarizeNearestRank(t *testing.T) {
	var lags []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		lags = append(lags, time.Duration(i)*time.Millisecond)
	}
	got := summarize(lags)
	want := lagStats{N: 100, P50: 50 * time.Millisecond, P90: 90 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}
	if got != want {
		t.Fatalf("summarize = %+v, want %+v", got, want)
	}
	if lags[0] != 100*time.Millisecond {
		t.Fatal("summarize sorted its input in place")
	}
	if (summarize(nil) != lagStats{}) {
		t.Fatal("summarize(nil) is not the zero value")
	}
}

func TestOccurrencesAreTheNextWholeMinutes(t *testing.T) {
	at := time.Date(2026, 11, 30, 15, 41, 0, 0, time.UTC)
	got := occurrences(at, 2) // strictly after: 15:41:00 itself is not included
	if !got[0].Equal(at.Add(time.Minute)) || !got[1].Equal(at.Add(2*time.Minute)) {
		t.Fatalf("occurrences = %v", got)
	}
	got = occurrences(at.Add(59*time.Second), 1)
	if !got[0].Equal(at.Add(time.Minute)) {
		t.Fatalf("occurrences = %v", got)
	}
}

func TestRequestsByMethod(t *testing.T) {
	const text = `# HELP rest_client_requests_total Number of HTTP requests, partitioned by status code, method, and host.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:1",method="GET"} 7
rest_client_requests_total{code="404",host="127.0.0.1:1",method="GET"} 1
rest_client_requests_total{code="201",host="127.0.0.1:1",method="POST"} 3e+03
rest_client_request_duration_seconds_count{host="127.0.0.1:1",verb="GET"} 99
`
	got, err := requestsByMethod(text)
	if err != nil {
		t.Fatal(err)
	}
	if got["GET"] != 8 || got["POST"] != 3000 || len(got) != 2 {
		t.Fatalf("requestsByMethod = %v", got)
	}
}

func TestSumByWorkqueue(t *testing.T) {
	const text = `workqueue_depth{controller="lockedcronjob",name="lockedcronjob",priority=""} 12
workqueue_depth_other 5
workqueue_adds_total{name="cronjob"} 40
workqueue_adds_total{name="DynamicServingCertificateController"} 2
`
	depth, err := sumBy(text, "workqueue_depth", "name")
	if err != nil {
		t.Fatal(err)
	}
	if depth["lockedcronjob"] != 12 || len(depth) != 1 {
		t.Fatalf("depth = %v (workqueue_depth_other is another metric)", depth)
	}
	adds, err := sumBy(text, "workqueue_adds_total", "name")
	if err != nil {
		t.Fatal(err)
	}
	if total(adds) != 42 {
		t.Fatalf("adds = %v", adds)
	}
}

// The API server's request durations are summed by verb and resource together; a
// sample without one of the labels has "?" in its place.
func TestSumByTwoLabels(t *testing.T) {
	const text = `apiserver_request_duration_seconds_sum{component="apiserver",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 1.5
apiserver_request_duration_seconds_sum{component="apiserver",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 2
apiserver_request_duration_seconds_sum{component="apiserver",resource="pods",scope="namespace",subresource="",verb="POST",version="v1"} 0.5
apiserver_request_duration_seconds_sum{verb="GET"} 3
`
	got, err := sumBy(text, "apiserver_request_duration_seconds_sum", "verb", "resource")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"POST pods": 2, "PATCH pods": 2, "GET ?": 3}
	if !maps.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
