package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/lockedcron/lockedcron/internal/redistest"
)

// Plain tests (no apiserver): they run without KUBEBUILDER_ASSETS, e.g.
// go test ./internal/controller/ -run 'TestNotDurable|TestDurability|TestCleanWarning'.

func TestNotDurableEventOncePerTransition(t *testing.T) {
	w := []string{"Redis has appendonly no: a restart loses the lock and the ledger (set appendonly yes)"}
	w2 := append([]string{"Redis maxmemory-policy allkeys-lru can evict the lock or the ledger (set noeviction)"}, w...)
	cond := func(reason, msg string) *metav1.Condition {
		return &metav1.Condition{Type: ConditionLockBackendReady, Status: metav1.ConditionTrue, Reason: reason, Message: msg}
	}
	for name, tc := range map[string]struct {
		prev     *metav1.Condition
		warnings []string
		want     bool
	}{
		"first pass, not durable":   {nil, w, true},
		"first pass, durable":       {nil, nil, false},
		"from reachable":            {cond(ReasonRedisReachable, "Secret read and Redis answered"), w, true},
		"from unreachable":          {&metav1.Condition{Reason: ReasonRedisUnreachable, Status: metav1.ConditionFalse}, w, true},
		"still not durable":         {cond(ReasonNotDurable, durabilityMessage(w)), w, false},
		"warnings changed":          {cond(ReasonNotDurable, durabilityMessage(w)), w2, true},
		"back to durable":           {cond(ReasonNotDurable, durabilityMessage(w)), nil, false},
		"durable, stays durable":    {cond(ReasonRedisReachable, "Secret read and Redis answered"), nil, false},
		"secret broken to not dur.": {&metav1.Condition{Reason: ReasonSecretInvalid, Status: metav1.ConditionFalse}, w, true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := notDurableEvent(tc.prev, tc.warnings); got != tc.want {
				t.Errorf("notDurableEvent = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestCleanWarning(t *testing.T) {
	for in, want := range map[string]string{
		"Redis has appendonly no":         "Redis has appendonly no",
		"  two\nlines\r\tand\x00nul  ":    "two lines  andnul",
		"\x1b[31mred\x1b[0m":              "[31mred[0m",
		strings.Repeat("é", 200):          strings.Repeat("é", 128) + "…",
		strings.Repeat("a", 300):          strings.Repeat("a", 256) + "…",
		"":                                "",
		"policy \u202eevil":               "policy evil",
		"maxmemory-policy allkeys-lru ok": "maxmemory-policy allkeys-lru ok",
	} {
		if got := cleanWarning(in); got != want {
			t.Errorf("cleanWarning(%q) = %q, want %q", in, got, want)
		}
	}
}

func infoCalls(t *testing.T, s *redistest.Server) int {
	t.Helper()
	c := s.Client()
	defer c.Close()
	stats, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(stats, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_info:calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}

// One INFO per client per durabilityTTL, whatever the number of passes; a changed
// Secret (a new client) is checked anew.
func TestDurabilityIsCachedPerClient(t *testing.T) {
	volatile := redistest.Start(t)
	durable := redistest.Start(t, redistest.WithPersistence())
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "redis"},
		Data:       map[string][]byte{"url": []byte(volatile.URL())},
	}
	reader := fake.NewClientBuilder().WithObjects(secret).Build()
	b := newBackends(reader)
	defer b.close()
	clock := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	b.now = func() time.Time { return clock }
	ctx := context.Background()

	before := infoCalls(t, volatile) // the INFO of this call itself counts after
	for i := 0; i < 5; i++ {
		_, warnings, berr := b.check(ctx, "ns", "redis")
		if berr != nil {
			t.Fatal(berr)
		}
		if len(warnings) != 1 || !strings.Contains(warnings[0], "appendonly no") {
			t.Fatalf("warnings = %q, want one about appendonly", warnings)
		}
		clock = clock.Add(30 * time.Second)
	}
	if got := infoCalls(t, volatile) - before - 1; got != 1 {
		t.Errorf("INFO sent %d times over five passes within %s, want 1", got, durabilityTTL)
	}
	clock = clock.Add(durabilityTTL)
	if _, _, berr := b.check(ctx, "ns", "redis"); berr != nil {
		t.Fatal(berr)
	}
	if got := infoCalls(t, volatile) - before - 2; got != 2 {
		t.Errorf("after the cache expired: INFO sent %d times in all, want 2", got)
	}

	// The Secret now points at a Redis with an AOF: a new client, checked at once.
	secret.Data["url"] = []byte(durable.URL())
	if err := reader.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	_, warnings, berr := b.check(ctx, "ns", "redis")
	if berr != nil {
		t.Fatal(berr)
	}
	if len(warnings) != 0 {
		t.Errorf("durable Redis: warnings %q", warnings)
	}

	// A Redis that stops answering is unreachable, not "not durable".
	durable.Stop()
	if _, _, berr := b.check(ctx, "ns", "redis"); berr == nil || berr.reason != ReasonRedisUnreachable {
		t.Errorf("stopped Redis: %v, want %s", berr, ReasonRedisUnreachable)
	}
}

// A user without +info gets a fixed warning, not the server's error text.
func TestDurabilityWithoutInfoPermission(t *testing.T) {
	s := redistest.Start(t)
	s.Do("ACL", "SETUSER", "locker", "on", ">pw", "~*", "+@all", "-info")
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "redis"},
		Data:       map[string][]byte{"url": []byte(s.URL()), "username": []byte("locker"), "password": []byte("pw")},
	}
	b := newBackends(fake.NewClientBuilder().WithObjects(secret).Build())
	defer b.close()
	_, warnings, berr := b.check(context.Background(), "ns", "redis")
	if berr != nil {
		t.Fatal(berr)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "+info") || strings.Contains(warnings[0], "NOPERM") || strings.Contains(warnings[0], "pw") {
		t.Errorf("warnings = %q, want the fixed +info warning", warnings)
	}
}

// TestDurabilityMessageIsBounded: a Cluster of hundreds of masters without AOF, each its own
// warning, made a LockBackendReady message over a condition's 32 KiB: every status write
// of the job was refused (review, session 45).
func TestDurabilityMessageIsBounded(t *testing.T) {
	var w []string
	for i := range 400 {
		w = append(w, fmt.Sprintf("Redis 10.0.%d.%d:7000 has appendonly no: a restart loses the lock and the ledger (set appendonly yes)", i/250, i%250))
	}
	msg := durabilityMessage(w)
	if len(msg) > 4096 || !strings.HasSuffix(msg, "and 392 more like these") || !strings.HasPrefix(msg, w[0]) {
		t.Fatalf("%d bytes: %q", len(msg), msg[max(0, len(msg)-80):])
	}
	if got := durabilityMessage(w[:2]); got != w[0]+"; "+w[1] {
		t.Fatalf("two warnings: %q", got)
	}
}

// TestClusterClientMadeAgainHourly: go-redis's Cluster client remembers every address a
// slot map or redirect ever named (and walks them all when no node answers): the manager
// makes a Secret's Cluster client again each hour, closing the old one only after those
// holding it have moved on. A standalone client is kept.
func TestClusterClientMadeAgainHourly(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for url, remade := range map[string]bool{"redis+cluster://127.0.0.1:1": true, "redis://127.0.0.1:1": false} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "redis"}, Data: map[string][]byte{"url": []byte(url)}}
		b := newBackends(fake.NewClientBuilder().WithObjects(secret).Build())
		b.now = func() time.Time { return now }
		first, _, berr := b.client(context.Background(), "ns", "redis")
		if berr != nil {
			t.Fatal(berr)
		}
		now = now.Add(59 * time.Minute)
		if again, _, _ := b.client(context.Background(), "ns", "redis"); again != first {
			t.Fatalf("%s: made again within the hour", url)
		}
		now = now.Add(2 * time.Minute)
		later, _, _ := b.client(context.Background(), "ns", "redis")
		if (later != first) != remade {
			t.Fatalf("%s: made again after an hour: %t, want %t", url, later != first, remade)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		if err := first.Ping(ctx).Err(); errors.Is(err, redis.ErrClosed) {
			t.Fatalf("%s: the old client closed at once, under those still holding it", url)
		}
		cancel()
		b.close()
	}
}

// TestConditionMessageFitsTheCRD: a Secret's Cluster url of thousands of seeds, one of
// them link-local, made a LockBackendReady message quoting each (56 KiB) past the 32 KiB a
// condition's message may hold: every status write of the job was refused, its pods left
// uncounted until the Secret was fixed (helper-78). Every condition message is cut to fit.
func TestConditionMessageFitsTheCRD(t *testing.T) {
	// A message of the size a 3,000-host url made, one of them link-local, quoted each
	// (the url's hosts are bounded now, lock.MaxURLHosts: every message is still cut).
	var hosts []string
	for i := range 3000 {
		hosts = append(hosts, fmt.Sprintf("%q", fmt.Sprintf("r%d.example:6379", i)))
	}
	berr := &backendError{reason: ReasonRedisUnreachable, msg: "spec.lock.redis.secretRef: Secret ns/redis: url names " + strings.Join(hosts, ", ")}
	if len(berr.Error()) <= maxConditionMessage {
		t.Fatalf("the test needs a message over the bound: %d bytes", len(berr.Error()))
	}
	p := newPass(passJob("* * * * *", false), passAt, logr.Discard())
	p.setCondition(ConditionLockBackendReady, false, berr.reason, berr.Error())
	msg := meta.FindStatusCondition(p.status.Conditions, ConditionLockBackendReady).Message
	if len(msg) > maxConditionMessage || !strings.HasPrefix(msg, berr.Error()[:200]) || !strings.HasSuffix(msg, "…") {
		t.Fatalf("message of %d bytes (at most %d): %.200q … %q", len(msg), maxConditionMessage, msg, msg[max(0, len(msg)-40):])
	}
	// Unchanged, it is not news.
	if p.setCondition(ConditionLockBackendReady, false, berr.reason, berr.Error()) {
		t.Error("the same message, cut again, taken for a change")
	}
}
