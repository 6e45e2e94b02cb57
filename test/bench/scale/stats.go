package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// lagStats summarises creation lags (first seen − scheduled instant).
type lagStats struct {
	N                  int
	P50, P90, P99, Max time.Duration
}

// summarize computes the nearest-rank percentiles of lags (zero value for none).
func summarize(lags []time.Duration) lagStats {
	if len(lags) == 0 {
		return lagStats{}
	}
	s := append([]time.Duration(nil), lags...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(i, 0)]
	}
	return lagStats{N: len(s), P50: rank(0.50), P90: rank(0.90), P99: rank(0.99), Max: s[len(s)-1]}
}

// occurrences lists the whole minutes in (after, after+k minutes]: the first k
// instants of a `* * * * *` schedule strictly after `after`.
func occurrences(after time.Time, k int) []time.Time {
	first := after.Truncate(time.Minute).Add(time.Minute)
	out := make([]time.Time, k)
	for i := range out {
		out[i] = first.Add(time.Duration(i) * time.Minute)
	}
	return out
}

// requestsByMethod sums client-go's rest_client_requests_total by method from a
// Prometheus text exposition.
func requestsByMethod(exposition string) (map[string]float64, error) {
	return sumBy(exposition, "rest_client_requests_total", "method")
}

// sumBy sums the samples of metric (without labels too) in a Prometheus text
// exposition by the values of labels, joined by " " ("?" where one is absent).
func sumBy(exposition, metric string, labels ...string) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(exposition))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, metric)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		pairs, value := "", rest
		if rest[0] == '{' {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				return nil, fmt.Errorf("malformed sample %q", line)
			}
			pairs, value = rest[1:end], rest[end+1:]
		}
		f := strings.Fields(value)
		if len(f) == 0 {
			return nil, fmt.Errorf("malformed sample %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("sample %q: %w", line, err)
		}
		key := make([]string, len(labels))
		for i := range key {
			key[i] = "?"
		}
		for _, kv := range strings.Split(pairs, ",") {
			if k, val, ok := strings.Cut(kv, "="); ok {
				if i := slices.Index(labels, k); i >= 0 {
					key[i] = strings.Trim(val, `"`)
				}
			}
		}
		out[strings.Join(key, " ")] += v
	}
	return out, sc.Err()
}

// total is the sum of m's values.
func total(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// procSample is a process's CPU time (user+system) and memory, from /proc.
type procSample struct {
	CPU      time.Duration
	RSS, HWM int64 // bytes
	// RSS's parts: anonymous memory (the Go heap, stacks, the runtime's own) and
	// file-backed pages (the binary's text and data as mapped), bytes.
	Anon, File int64
}

// clockTick is USER_HZ, 100 on every Linux this runs on.
const clockTick = 100

func sampleProc(pid int) (procSample, error) {
	var ps procSample
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ps, err
	}
	// Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
	rest := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(rest) < 13 {
		return ps, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	ut, _ := strconv.ParseInt(rest[11], 10, 64)
	st, _ := strconv.ParseInt(rest[12], 10, 64)
	ps.CPU = time.Duration(ut+st) * time.Second / clockTick
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ps, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			ps.RSS = kb << 10
		case "VmHWM:":
			ps.HWM = kb << 10
		case "RssAnon:":
			ps.Anon = kb << 10
		case "RssFile:":
			ps.File = kb << 10
		}
	}
	return ps, nil
}
