// Package metricsauth is what lets a request through to the secure
// metrics page (kctl's ServeSecureMetrics): its bearer token authenticated
// by the API server (a TokenReview), its user authorized to get /metrics
// (a SubjectAccessReview), the verdicts cached per token and the reviews
// of unknown tokens rate limited.
package metricsauth

import (
	"container/list"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/kctl-dev/kctl/internal/errtext"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/flowcontrol"
)

// The limits of ServeSecureMetrics's token reviews.
const (
	// VerdictTTL is how long an allowed or forbidden verdict is kept:
	// 10 s. A token revoked or a right removed takes effect within it.
	VerdictTTL = 10 * time.Second
	// RejectedTTL is how long a token the API server did not
	// authenticate is kept: 5 s, so that a scraper retrying a bad token
	// costs a review at most every 5 s, and one rejected while the API
	// server's authenticator failed gets in soon after it recovers.
	RejectedTTL = 5 * time.Second
	// MaxVerdicts bounds the cache: 1024 tokens, the least recently used
	// evicted first. It must exceed ReviewBurst + ReviewRate *
	// VerdictTTL (120), the tokens that can be reviewed within a TTL, so
	// that no verdict is evicted within its TTL; a scraper whose last
	// scrape is less than (1024-20)/10 = 100 s old is still known.
	MaxVerdicts = 1024
	// ReviewRate and ReviewBurst bound the reviews of tokens that have
	// no verdict, or a rejected one: 10 a second, 20 at once. Past them
	// the request is answered 429 with Retry-After: 1. A token the API
	// server authenticated before is reviewed past the bound: the
	// ServiceAccounts of real scrapers are few.
	ReviewRate  = 10
	ReviewBurst = 20
	// ReviewQPS and ReviewQPSBurst are the client-side rate limit of the
	// reviews' connection (kctl's reviewConn), of its own: 20 requests a second,
	// 40 at once: a review costs one request (rejected) or two.
	ReviewQPS      = 2 * ReviewRate
	ReviewQPSBurst = 2 * ReviewBurst
)

// Auth lets a request through to the page only if its bearer token
// is authenticated and its user authorized to get /metrics. Verdicts are
// cached by the token's SHA-256 (VerdictTTL, RejectedTTL); an error of the
// API server is not cached. It is safe for concurrent use.
type Auth struct {
	tokens   creator[TokenReview]
	access   creator[AccessReview]
	log      *slog.Logger
	verdicts *verdicts
	// limit bounds the reviews of tokens not known to the API server
	// (ReviewRate, ReviewBurst).
	limit flowcontrol.RateLimiter
}

// creator sends a review and reads its answer into obj; kctl's
// *Client[TokenReview] and *Client[AccessReview] are ones.
type creator[T any] interface {
	Create(ctx context.Context, obj *T) error
}

// New returns the Auth of ServeSecureMetrics: its reviews go through
// tokens and access; failures of the API server are logged to log.
func New(tokens creator[TokenReview], access creator[AccessReview], log *slog.Logger) *Auth {
	return &Auth{
		tokens:   tokens,
		access:   access,
		log:      log,
		verdicts: newVerdicts(MaxVerdicts),
		limit: flowcontrol.NewTokenBucketRateLimiter(
			ReviewRate, ReviewBurst),
	}
}

// Wrap lets only allowed requests reach page.
func (a *Auth) Wrap(page http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		token = strings.TrimSpace(token)
		if !ok || token == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			http.Error(w, "Unauthorized: a bearer token is required",
				http.StatusUnauthorized)
			return
		}
		code, err := a.check(r.Context(), token)
		switch {
		case err != nil:
			a.log.Error("kctl: secure metrics: "+err.Error(),
				"remote", r.RemoteAddr)
			http.Error(w, "Internal Server Error: "+
				"the API server could not check the token",
				http.StatusInternalServerError)
		case code == http.StatusTooManyRequests:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "Too Many Requests: too many new tokens "+
				"to review", code)
		case code == http.StatusUnauthorized:
			http.Error(w, "Unauthorized", code)
		case code == http.StatusForbidden:
			http.Error(w, "Forbidden: get /metrics is not allowed", code)
		default:
			page.ServeHTTP(w, r)
		}
	})
}

// check returns the verdict for token: from the cache, or the reviews, or
// 429 if token needs a review past the bound.
func (a *Auth) check(ctx context.Context, token string) (int, error) {
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	v, found := a.verdicts.get(key)
	if found && now.Before(v.until) {
		return v.code, nil
	}
	authenticated := found && v.code != http.StatusUnauthorized
	if !authenticated && !a.limit.TryAccept() {
		return http.StatusTooManyRequests, nil
	}
	code, err := a.review(ctx, token)
	if err != nil {
		return 0, err
	}
	ttl := VerdictTTL
	if code == http.StatusUnauthorized {
		ttl = RejectedTTL
	}
	a.verdicts.put(key, verdict{code: code, until: now.Add(ttl)})
	return code, nil
}

// review asks the API server who token is (401 if nobody) and whether
// they may get /metrics (403 if not); 200 lets the request through.
func (a *Auth) review(ctx context.Context, token string) (int, error) {
	tr := &TokenReview{}
	tr.Spec.Token = token
	err := a.tokens.Create(ctx, tr)
	if err != nil {
		return 0, fmt.Errorf("reviewing a token: %w", errtext.Unprefixed(err))
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, nil
	}
	user := tr.Status.User
	sar := &AccessReview{}
	sar.Spec.User = user.Username
	sar.Spec.UID = user.UID
	sar.Spec.Groups = user.Groups
	sar.Spec.Extra = user.Extra
	sar.Spec.NonResourceAttributes.Path = "/metrics"
	sar.Spec.NonResourceAttributes.Verb = "get"
	err = a.access.Create(ctx, sar)
	if err != nil {
		return 0, fmt.Errorf("reviewing %s's access to /metrics: %w",
			user.Username, errtext.Unprefixed(err))
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden, nil
	}
	return http.StatusOK, nil
}

// TokenReview is authentication.k8s.io/v1's TokenReview, the fields kctl
// sends and reads. kctl does not import k8s.io/api/authentication/v1: an
// API package's type registration links it into every program.
type TokenReview struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Token string `json:"token"`
	} `json:"spec"`
	Status struct {
		Authenticated bool `json:"authenticated"`
		User          User `json:"user"`
	} `json:"status"`
}

// User is authentication.k8s.io/v1's UserInfo, as kctl.UserInfo.
type User struct {
	Username string              `json:"username,omitempty"`
	UID      string              `json:"uid,omitempty"`
	Groups   []string            `json:"groups,omitempty"`
	Extra    map[string][]string `json:"extra,omitempty"`
}

// AccessReview is authorization.k8s.io/v1's SubjectAccessReview of a
// non-resource URL, the fields kctl sends and reads.
type AccessReview struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		NonResourceAttributes struct {
			Path string `json:"path"`
			Verb string `json:"verb"`
		} `json:"nonResourceAttributes"`
		User   string              `json:"user"`
		UID    string              `json:"uid,omitempty"`
		Groups []string            `json:"groups,omitempty"`
		Extra  map[string][]string `json:"extra,omitempty"`
	} `json:"spec"`
	Status struct {
		Allowed bool `json:"allowed"`
	} `json:"status"`
}

// verdict is the answer for one token: the status code to send (200 lets
// it through) until a time.
type verdict struct {
	code  int
	until time.Time
}

// verdicts holds at most max verdicts by token hash, evicting the least
// recently used one to make room. Expired verdicts stay until evicted:
// check tells from one whether the API server authenticated the token.
// It is safe for concurrent use.
type verdicts struct {
	mu  sync.Mutex
	max int
	// byKey and used hold the same entries (*verdictEntry), used in
	// order of use, the most recent first.
	byKey map[[32]byte]*list.Element
	used  list.List
}

type verdictEntry struct {
	key [32]byte
	verdict
}

func newVerdicts(max int) *verdicts {
	return &verdicts{max: max, byKey: map[[32]byte]*list.Element{}}
}

// get returns key's verdict, expired or not, and counts it as used.
func (c *verdicts) get(key [32]byte) (verdict, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return verdict{}, false
	}
	c.used.MoveToFront(e)
	return e.Value.(*verdictEntry).verdict, true
}

// put stores v for key as used now, evicting the least recently used
// verdict if there is no room for it.
func (c *verdicts) put(key [32]byte, v verdict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if ok {
		e.Value.(*verdictEntry).verdict = v
		c.used.MoveToFront(e)
		return
	}
	if len(c.byKey) >= c.max {
		last := c.used.Back()
		c.used.Remove(last)
		delete(c.byKey, last.Value.(*verdictEntry).key)
	}
	entry := &verdictEntry{key: key, verdict: v}
	c.byKey[key] = c.used.PushFront(entry)
}
