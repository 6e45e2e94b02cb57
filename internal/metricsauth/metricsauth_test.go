package metricsauth

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/flowcontrol"
)

// The guard's own choices, against a fake API server whose answers the test sets and
// counts: which answers it keeps and for how long (a revoked binding must stop scrapes,
// a new one must start them), what it does when a review cannot be made, and what reaches
// the handler. TestMetricsEndpointAuth (cmd/manager) asks a real API server.

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time                  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *clock) Sleep(d time.Duration)           { c.step(d) }
func (c *clock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// apiServer answers reviews: tokens maps a token to its user, allowed a user to whether
// it may get /metrics; fail, while set, is the error of every review.
type apiServer struct {
	mu                   sync.Mutex
	tokens               map[string]string
	allowed              map[string]bool
	fail                 []error // returned one per TokenReview while any is left
	sarFail              []error // the same for SubjectAccessReviews
	tokenError           string  // while set, every TokenReview answers unauthenticated with it
	tokenCalls, sarCalls int
}

// The user the API server says a token belongs to: its UID, groups and extra must reach
// the SubjectAccessReview (a binding to a group or a UID-bound rule relies on them).
func userOf(name string) authnv1.UserInfo {
	return authnv1.UserInfo{Username: name, UID: "uid-" + name, Groups: []string{"scrapers"},
		Extra: map[string]authnv1.ExtraValue{"authentication.kubernetes.io/node-name": {"node-1"}}}
}

func (a *apiServer) guard(c *clock) *guard {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(act k8stesting.Action) (bool, runtime.Object, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.tokenCalls++
		if err := pop(&a.fail); err != nil {
			return true, nil, err
		}
		tr := act.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		if a.tokenError != "" {
			tr.Status = authnv1.TokenReviewStatus{Error: a.tokenError}
		} else if u, ok := a.tokens[tr.Spec.Token]; ok {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: userOf(u)}
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(act k8stesting.Action) (bool, runtime.Object, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.sarCalls++
		if err := pop(&a.sarFail); err != nil {
			return true, nil, err
		}
		sar := act.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
		na, u := sar.Spec.NonResourceAttributes, userOf(sar.Spec.User)
		sameUser := sar.Spec.UID == u.UID && slices.Equal(sar.Spec.Groups, append(u.Groups, "system:authenticated")) &&
			len(sar.Spec.Extra) == 1 && slices.Equal(sar.Spec.Extra["authentication.kubernetes.io/node-name"], []string{"node-1"})
		sar.Status.Allowed = sameUser && na != nil && na.Path == "/metrics" && na.Verb == "get" && a.allowed[sar.Spec.User]
		return true, sar, nil
	})
	return newGuard(cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews(), c, flowcontrol.NewTokenBucketRateLimiterWithClock(reviewQPS, reviewBurst, c))
}

// pop takes the first of errs, nil when there is none.
func pop(errs *[]error) error {
	if len(*errs) == 0 {
		return nil
	}
	err := (*errs)[0]
	*errs = (*errs)[1:]
	return err
}

func (a *apiServer) set(f func()) { a.mu.Lock(); defer a.mu.Unlock(); f() }
func (a *apiServer) calls() (int, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tokenCalls, a.sarCalls
}

// serve runs one request through g's filter; it returns the status code and the
// Authorization header the handler saw ("-" when the handler was not reached).
func serve(t *testing.T, g *guard, method, auth string) (int, string) {
	t.Helper()
	seen := "-"
	h, err := g.filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Get("Authorization")
		_, _ = w.Write([]byte("# HELP\n"))
	}))
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(method, "/metrics", nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, seen
}

func TestGuardAnswers(t *testing.T) {
	a := &apiServer{tokens: map[string]string{"good": "scraper", "other": "other"}, allowed: map[string]bool{"scraper": true}}
	g := a.guard(&clock{now: time.Unix(0, 0)})
	for _, c := range []struct {
		name, method, auth string
		code               int
	}{
		{"no header", http.MethodGet, "", http.StatusUnauthorized},
		{"basic credentials", http.MethodGet, "Basic Z29vZDo=", http.StatusUnauthorized},
		{"empty bearer", http.MethodGet, "Bearer ", http.StatusUnauthorized},
		{"token the API server does not accept", http.MethodGet, "Bearer forged", http.StatusUnauthorized},
		{"accepted, not allowed", http.MethodGet, "Bearer other", http.StatusForbidden},
		{"accepted and allowed", http.MethodGet, "Bearer good", http.StatusOK},
		{"scheme in lower case", http.MethodGet, "bearer good", http.StatusOK},
		{"allowed to get, not to post", http.MethodPost, "Bearer good", http.StatusForbidden},
	} {
		code, seen := serve(t, g, c.method, c.auth)
		if code != c.code {
			t.Errorf("%s: %d, want %d", c.name, code, c.code)
		}
		if code == http.StatusOK && seen != "" {
			t.Errorf("%s: the handler saw Authorization %q, want it removed", c.name, seen)
		}
		if code != http.StatusOK && seen != "-" {
			t.Errorf("%s: refused with %d, yet the handler ran", c.name, code)
		}
	}
}

// TestGuardKeepsAnswersForTheirTime: a token is reviewed once a minute, however often
// it scrapes; an allow is asked again after 5 minutes (a revoked binding stops scrapes
// then), a deny after 30 s (a new binding starts them then).
func TestGuardKeepsAnswersForTheirTime(t *testing.T) {
	a := &apiServer{tokens: map[string]string{"good": "scraper"}, allowed: map[string]bool{}}
	c := &clock{now: time.Unix(0, 0)}
	g := a.guard(c)
	want := func(step string, code, tokenCalls, sarCalls int) {
		t.Helper()
		if got, _ := serve(t, g, http.MethodGet, "Bearer good"); got != code {
			t.Errorf("%s: %d, want %d", step, got, code)
		}
		if tc, sc := a.calls(); tc != tokenCalls || sc != sarCalls {
			t.Errorf("%s: %d TokenReviews and %d SubjectAccessReviews so far, want %d and %d", step, tc, sc, tokenCalls, sarCalls)
		}
	}
	want("first scrape, no binding", http.StatusForbidden, 1, 1)
	a.set(func() { a.allowed["scraper"] = true }) // the binding is created
	c.step(29 * time.Second)
	want("29 s later: the deny still kept", http.StatusForbidden, 1, 1)
	c.step(2 * time.Second)
	want("31 s: asked again", http.StatusOK, 1, 2)
	c.step(30 * time.Second)
	want("61 s: the token reviewed again, the allow kept", http.StatusOK, 2, 2)
	a.set(func() { a.allowed["scraper"] = false }) // the binding is deleted
	c.step(4 * time.Minute)
	want("4 min after the allow: still kept", http.StatusOK, 3, 2)
	c.step(time.Minute + time.Second)
	want("5 min after the allow: asked again, denied", http.StatusForbidden, 4, 3)

	a.set(func() { delete(a.tokens, "good") }) // the token expires
	c.step(time.Minute + time.Second)
	want("the token no longer accepted", http.StatusUnauthorized, 5, 3)
}

// TestGuardReviewFailures: a review that fails on the way is retried; one that cannot be
// made answers 500, and is not kept (the next scrape asks again).
func TestGuardReviewFailures(t *testing.T) {
	a := &apiServer{tokens: map[string]string{"good": "scraper"}, allowed: map[string]bool{"scraper": true}}
	g := a.guard(&clock{now: time.Unix(0, 0)})
	gr := schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}

	a.set(func() { a.fail = []error{apierrors.NewTooManyRequests("slow down", 0)} })
	if code, _ := serve(t, g, http.MethodGet, "Bearer good"); code != http.StatusOK {
		t.Errorf("a review refused once with 429: %d, want 200 after a retry", code)
	}
	if tc, _ := a.calls(); tc != 2 {
		t.Errorf("%d TokenReviews, want 2 (one retry)", tc)
	}

	g = a.guard(&clock{now: time.Unix(0, 0)})
	a.set(func() {
		a.tokenCalls, a.fail = 0, []error{apierrors.NewForbidden(gr, "", errors.New("RBAC: no create on tokenreviews"))}
	})
	if code, _ := serve(t, g, http.MethodGet, "Bearer good"); code != http.StatusInternalServerError {
		t.Errorf("the manager may not review tokens: %d, want 500", code)
	}
	if code, _ := serve(t, g, http.MethodGet, "Bearer good"); code != http.StatusOK {
		t.Errorf("the next scrape, the review possible again: %d, want 200 (a failed review is not kept)", code)
	}
	if tc, _ := a.calls(); tc != 2 {
		t.Errorf("%d TokenReviews, want 2 (a refusal is not retried)", tc)
	}

	// A SubjectAccessReview that cannot be made: 500, not kept.
	g = a.guard(&clock{now: time.Unix(0, 0)})
	sar := schema.GroupResource{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}
	a.set(func() {
		a.sarFail = []error{apierrors.NewForbidden(sar, "", errors.New("RBAC: no create on subjectaccessreviews"))}
	})
	if code, _ := serve(t, g, http.MethodGet, "Bearer good"); code != http.StatusInternalServerError {
		t.Errorf("the manager may not review access: %d, want 500", code)
	}
	if code, _ := serve(t, g, http.MethodGet, "Bearer good"); code != http.StatusOK {
		t.Errorf("the next scrape, the access review possible again: %d, want 200 (a failed review is not kept)", code)
	}

	// The API server cannot tell who the token is (an authenticator failed): 401, and the
	// answer is not kept, so the token works as soon as the API server can tell again.
	g = a.guard(&clock{now: time.Unix(0, 0)})
	a.set(func() { a.tokenError = "webhook authenticator: connection refused" })
	if code, _ := serve(t, g, http.MethodGet, "Bearer good"); code != http.StatusUnauthorized {
		t.Errorf("a review answered with an error: %d, want 401", code)
	}
	a.set(func() { a.tokenError = "" })
	if code, _ := serve(t, g, http.MethodGet, "Bearer good"); code != http.StatusOK {
		t.Errorf("the next scrape, the API server able to tell: %d, want 200 (an answer with an error is not kept)", code)
	}
}

// TestForgedTokensAreAnsweredWithoutReviews: anyone who reaches the port can send tokens
// the guard has not seen, each a TokenReview. Past the reviews' budget such a request is
// answered 429 at once, asking the API server nothing, while a scraper whose answers are
// kept is still served; the budget refills with time.
func TestForgedTokensAreAnsweredWithoutReviews(t *testing.T) {
	a := &apiServer{tokens: map[string]string{"good": "scraper"}, allowed: map[string]bool{"scraper": true}}
	c := &clock{now: time.Unix(0, 0)}
	g := a.guard(c)
	if code, _ := serve(t, g, http.MethodGet, "Bearer good"); code != http.StatusOK {
		t.Fatalf("the scraper: %d", code)
	}
	codes := map[int]int{}
	for i := range 200 {
		code, _ := serve(t, g, http.MethodGet, fmt.Sprintf("Bearer forged-%d", i))
		codes[code]++
	}
	tokenCalls, _ := a.calls()
	if tokenCalls > reviewBurst || codes[http.StatusTooManyRequests] < 200-reviewBurst {
		t.Errorf("200 forged tokens: %d TokenReviews, answers %v; want at most %d reviews (the burst), the rest 429", tokenCalls, codes, reviewBurst)
	}
	if code, _ := serve(t, g, http.MethodGet, "Bearer good"); code != http.StatusOK {
		t.Errorf("the scraper, its answers kept, during the flood: %d", code)
	}
	c.step(time.Second)
	if code, _ := serve(t, g, http.MethodGet, "Bearer forged-new"); code != http.StatusUnauthorized {
		t.Errorf("a second later: %d, want a review again (401)", code)
	}
}
