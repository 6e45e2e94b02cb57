// Package metricsauth guards the manager's metrics endpoint as controller-runtime's
// filters.WithAuthenticationAndAuthorization does: the API server says who the caller's
// bearer token belongs to (a TokenReview) and whether that user may get the path asked
// (a SubjectAccessReview, as for any non-resource URL), each answer kept for a while.
//
// It asks through client-go's typed clients alone. The controller-runtime filter builds
// k8s.io/apiserver's delegating authenticator and authorizer, which link the API server's
// authentication and authorization configuration (CEL, OpenTelemetry, gRPC): 37 MB of the
// manager's 90 MB binary and about a tenth of its RSS at 5,000 jobs, for two POSTs and two
// caches (docs/performance.md).
//
// What it keeps from that filter: no anonymous access; every user in the group
// system:authenticated; answers cached as long (a token 1 min, an allow 5 min, a deny
// 30 s; an answer that carries an error not at all), so a revoked binding stops scrapes
// within 5 minutes;
// the same retries of a review that failed on the way (500 ms, ×1.5, 5 tries); the bearer
// token removed from the request once it has been used. What differs: a token the API
// server does not accept is refused with 401 (the filter answers 500, "Authentication
// failed", as if the review had failed); 500 is kept for a review that could not be made.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	k8suser "k8s.io/apiserver/pkg/authentication/user"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/retry"
	utilclock "k8s.io/utils/clock"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long answers are kept, and how a review is retried: controller-runtime's filter's
// figures (which are k8s.io/apiserver's defaults for delegated authentication).
const (
	tokenTTL      = time.Minute
	allowTTL      = 5 * time.Minute
	denyTTL       = 30 * time.Second
	reviewTimeout = 10 * time.Second
	cacheEntries  = 1024 // scrapers are few; a flood of forged tokens only evicts answers
)

// The reviews' own budget. Anyone who reaches the port can make the guard ask the API
// server: every request with a token not seen before is a TokenReview. Drawn from the
// manager's client budget (--kube-api-qps), a flood of forged tokens held back every
// job's pod creations and status writes; it has a budget of its own, and a request that
// would need a review past it is answered 429 at once, asking nothing. Scrapers are few
// and their answers are kept (a token a minute, an allow 5 minutes): a handful of
// reviews a minute.
const (
	reviewQPS   = 5
	reviewBurst = 20
)

// errBusy: the reviews' budget is spent.
var errBusy = errors.New("too many requests needing a review")

var reviewBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// Filter is a metricsserver.Options FilterProvider: it needs create on
// authentication.k8s.io tokenreviews and authorization.k8s.io subjectaccessreviews
// (cmd/manager/rbac.go); a scraper needs get on the non-resource URL /metrics
// (config/rbac/metrics_reader_role.yaml).
func Filter(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	// The manager's configuration carries its one client budget: the reviews have their
	// own (reviewQPS), checked before each review.
	cfg = rest.CopyConfig(cfg)
	cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	authn, err := authnclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	authz, err := authzclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	return newGuard(authn.TokenReviews(), authz.SubjectAccessReviews(), utilclock.RealClock{}, flowcontrol.NewTokenBucketRateLimiter(reviewQPS, reviewBurst)).filter, nil
}

// guard holds the two review clients and what they answered.
type guard struct {
	tokens authnclient.TokenReviewInterface
	access authzclient.SubjectAccessReviewInterface
	// users: sha256 of a token → *authnv1.UserInfo, nil when the API server refused it.
	// decisions: the SubjectAccessReview spec as JSON → decision.
	users, decisions *cache.LRUExpireCache
	budget           flowcontrol.RateLimiter // one token a review (reviewQPS)
}

type decision struct {
	allowed bool
	reason  string
}

// newGuard makes a guard whose answers expire by clk.
func newGuard(tokens authnclient.TokenReviewInterface, access authzclient.SubjectAccessReviewInterface, clk cache.Clock, budget flowcontrol.RateLimiter) *guard {
	return &guard{tokens: tokens, access: access, budget: budget,
		users: cache.NewLRUExpireCacheWithClock(cacheEntries, clk), decisions: cache.NewLRUExpireCacheWithClock(cacheEntries, clk)}
}

func (g *guard) filter(log logr.Logger, next http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, ok := bearerToken(req.Header.Get("Authorization"))
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		user, err := g.authenticate(req.Context(), token)
		if errors.Is(err, errBusy) {
			busy(w)
			return
		}
		if err != nil {
			log.Error(err, "Authentication failed")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		}
		if user == nil {
			log.V(4).Info("Authentication failed: token not accepted by the API server")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		d, err := g.authorize(req.Context(), user, strings.ToLower(req.Method), req.URL.Path)
		if errors.Is(err, errBusy) {
			busy(w)
			return
		}
		if err != nil {
			msg := fmt.Sprintf("Authorization for user %s failed", user.Username)
			log.Error(err, msg)
			http.Error(w, msg, http.StatusInternalServerError)
			return
		}
		if !d.allowed {
			msg := fmt.Sprintf("Authorization denied for user %s", user.Username)
			log.V(4).Info(msg, "reason", d.reason)
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		req.Header.Del("Authorization") // used: nothing behind the filter needs it
		next.ServeHTTP(w, req)
	}), nil
}

// busy answers a request that would need a review past the reviews' budget.
func busy(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, "Too Many Requests", http.StatusTooManyRequests)
}

// bearerToken is the token of an "Authorization: Bearer <token>" header (the scheme in
// any case), as the API server reads it; ok is false for any other header.
func bearerToken(header string) (token string, ok bool) {
	parts := strings.SplitN(strings.TrimSpace(header), " ", 3)
	if len(parts) < 2 || !strings.EqualFold(parts[0], "bearer") || parts[1] == "" {
		return "", false
	}
	return parts[1], true
}

// authenticate is who the API server says token belongs to, nil if it does not accept it.
func (g *guard) authenticate(ctx context.Context, token string) (*authnv1.UserInfo, error) {
	key := sha256.Sum256([]byte(token)) // the cache holds no token
	if v, ok := g.users.Get(key); ok {
		return v.(*authnv1.UserInfo), nil
	}
	var res *authnv1.TokenReview
	err := g.review(ctx, func(ctx context.Context) (err error) {
		res, err = g.tokens.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("TokenReview: %w", err)
	}
	if !res.Status.Authenticated {
		if res.Status.Error != "" {
			// The API server could not tell (an authenticator failed, or the token
			// expired): refused, and not kept, as k8s.io/apiserver's token cache keeps
			// no answer that carries an error.
			return nil, nil
		}
		g.users.Add(key, (*authnv1.UserInfo)(nil), tokenTTL)
		return nil, nil
	}
	user := withAuthenticatedGroup(res.Status.User)
	g.users.Add(key, &user, tokenTTL)
	return &user, nil
}

// withAuthenticatedGroup is u in the group system:authenticated, as k8s.io/apiserver's
// delegating authenticator puts every user it authenticates (the API server's
// TokenReview answers with it already).
func withAuthenticatedGroup(u authnv1.UserInfo) authnv1.UserInfo {
	if u.Username == k8suser.Anonymous {
		return u
	}
	for _, g := range u.Groups {
		if g == k8suser.AllAuthenticated || g == k8suser.AllUnauthenticated {
			return u
		}
	}
	u.Groups = append(slices.Clip(u.Groups), k8suser.AllAuthenticated)
	return u
}

// authorize is whether user may take verb on the non-resource URL path.
func (g *guard) authorize(ctx context.Context, user *authnv1.UserInfo, verb, path string) (decision, error) {
	spec := authzv1.SubjectAccessReviewSpec{
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb},
		User:                  user.Username,
		UID:                   user.UID,
		Groups:                user.Groups,
	}
	if len(user.Extra) > 0 {
		spec.Extra = make(map[string]authzv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			spec.Extra[k] = authzv1.ExtraValue(v)
		}
	}
	b, err := json.Marshal(spec) // the whole question (map keys sorted) is the key
	if err != nil {
		return decision{}, err
	}
	key := string(b)
	if v, ok := g.decisions.Get(key); ok {
		return v.(decision), nil
	}
	var res *authzv1.SubjectAccessReview
	err = g.review(ctx, func(ctx context.Context) (err error) {
		res, err = g.access.Create(ctx, &authzv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return decision{}, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	d := decision{allowed: res.Status.Allowed && !res.Status.Denied, reason: res.Status.Reason}
	if d.allowed {
		g.decisions.Add(key, d, allowTTL)
	} else {
		if res.Status.EvaluationError != "" {
			d.reason += " (" + res.Status.EvaluationError + ")"
		}
		g.decisions.Add(key, d, denyTTL)
	}
	return d, nil
}

// review makes one review call, within reviewTimeout, retried with reviewBackoff while it
// fails on the way (what k8s.io/apiserver's webhook.DefaultShouldRetry retries); errBusy
// when the reviews' budget is spent.
func (g *guard) review(ctx context.Context, call func(context.Context) error) error {
	if !g.budget.TryAccept() {
		return errBusy
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	return retry.OnError(reviewBackoff, func(err error) bool {
		if ctx.Err() != nil {
			return false
		}
		if utilnet.IsConnectionReset(err) || utilnet.IsHTTP2ConnectionLost(err) || apierrors.IsInternalError(err) ||
			apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) {
			return true
		}
		_, delay := apierrors.SuggestsClientDelay(err)
		return delay
	}, func() error { return call(ctx) })
}
