package soak

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	_ "github.com/Shopify/toxiproxy/v2/toxics" // registers the toxic types
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/lockedcron/lockedcron/internal/redistest"
)

// toxicLink is a Toxiproxy proxy (the library, in this process) on the host loop's link to
// Redis: lockwrap → toxicLink → the freezable proxy → Redis. A FaultNetworkToxic adds one
// toxic to it for the fault's duration.
type toxicLink struct {
	proxy *toxiproxy.Proxy
}

func startToxicLink(t *testing.T, upstream string) *toxicLink {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "host-redis", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("toxiproxy: %v", err)
	}
	t.Cleanup(p.Stop)
	return &toxicLink{proxy: p}
}

func (l *toxicLink) URL() string { return "redis://" + l.proxy.Listen }

// toxics are the ones a fault picks from (by its planned time, so a seed repeats them):
// added latency with jitter on both directions, a connection that goes silent and is
// closed after a while (timeout), and connections reset by the peer (reset_peer).
var toxics = []struct{ name, json string }{
	{"latency", `{"name":"latency","type":"latency","stream":"downstream","attributes":{"latency":1500,"jitter":700}}`},
	{"timeout", `{"name":"timeout","type":"timeout","stream":"upstream","attributes":{"timeout":2500}}`},
	{"reset_peer", `{"name":"reset_peer","type":"reset_peer","stream":"upstream","attributes":{"timeout":300}}`},
}

// inject adds the fault's toxic for d and removes it; it returns what it did, "" when it
// could not add it (not landed). Each fault's toxic has a name of its own, so that two
// faults at once that pick the same kind both land.
func (l *toxicLink) inject(f Fault) string {
	tx := toxics[int(f.At/time.Millisecond)%len(toxics)]
	name := toxicName(tx.name, f)
	js := strings.Replace(tx.json, `"name":"`+tx.name+`"`, `"name":"`+name+`"`, 1)
	if _, err := l.proxy.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		return ""
	}
	time.Sleep(f.For)
	if err := l.proxy.Toxics.RemoveToxic(context.Background(), name); err != nil {
		return fmt.Sprintf("toxiproxy %s for %v (removing it: %v)", tx.name, f.For, err)
	}
	return fmt.Sprintf("toxiproxy %s on the host loop's link to Redis for %v", tx.name, f.For)
}

// toxicName is the name of fault f's toxic of kind name.
func toxicName(name string, f Fault) string { return fmt.Sprintf("%s-%d", name, f.At.Milliseconds()) }

// TestToxicsBreakTheHostLink: each toxic the soak injects does to a Redis client what it
// says (slows it, cuts it, resets it), and the link works again once it is removed.
func TestToxicsBreakTheHostLink(t *testing.T) {
	r := redistest.Start(t)
	link := startToxicLink(t, r.Addr())
	ctx := context.Background()
	client := func() *redis.Client {
		opt, err := redis.ParseURL(link.URL())
		if err != nil {
			t.Fatal(err)
		}
		opt.ReadTimeout, opt.MaxRetries = 4*time.Second, -1
		c := redis.NewClient(opt)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	for i, tx := range toxics {
		t.Run(tx.name, func(t *testing.T) {
			c := client()
			if err := c.Ping(ctx).Err(); err != nil {
				t.Fatalf("before the toxic: %v", err)
			}
			done := make(chan string)
			f := Fault{At: time.Duration(i) * time.Millisecond, For: 3 * time.Second}
			go func() { done <- link.inject(f) }()
			// A second fault picking the same toxic while the first is in place lands too
			// (it was refused, "toxic already exists", and still counted as landed).
			again := make(chan string)
			go func() {
				again <- link.inject(Fault{At: f.At + time.Duration(len(toxics))*time.Millisecond, For: time.Second})
			}()
			if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
				return link.proxy.Toxics.GetToxic(toxicName(tx.name, f)) != nil, nil
			}); err != nil {
				t.Fatalf("toxic %s never in place", tx.name)
			}
			start := time.Now()
			err := c.Ping(ctx).Err()
			took := time.Since(start)
			switch {
			case tx.name == "latency" && (err != nil || took < 800*time.Millisecond):
				t.Errorf("PING under latency: %v after %v, want an answer after at least 800ms", err, took)
			case tx.name != "latency" && err == nil:
				t.Errorf("PING under %s answered after %v, want an error", tx.name, took)
			}
			t.Logf("%s", <-done)
			if note := <-again; note == "" {
				t.Errorf("a second %s fault while the first was in place did not land", tx.name)
			}
			if err := client().Ping(ctx).Err(); err != nil {
				t.Errorf("after the toxic is removed: %v", err)
			}
		})
	}
}
