// Package metricsauth authenticates and authorizes requests to the manager's metrics endpoint against the API
// server (TokenReview and SubjectAccessReview), as controller-runtime's filters.WithAuthenticationAndAuthorization
// does, without linking k8s.io/apiserver.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long the metrics filter trusts an answer of the API server, as controller-runtime's
// filters.WithAuthenticationAndAuthorization does: a token's review for a minute, an allowed request for five, a
// denied one for thirty seconds.
const (
	tokenReviewTTL = time.Minute
	allowedTTL     = 5 * time.Minute
	deniedTTL      = 30 * time.Second
	// reviewTimeout bounds one TokenReview or SubjectAccessReview.
	reviewTimeout = 10 * time.Second
	// maxCached bounds each cache, so a caller sending random tokens cannot grow the manager's memory.
	maxCached = 1024
)

// Filter is the metrics server's filter for --metrics-secure: a request passes only when the API server
// authenticates its bearer token (a TokenReview: 401 when it does not) and authorizes its user for the request's
// verb on its path (a SubjectAccessReview of a non-resource URL: 403 when it does not). It decides as
// controller-runtime's filters.WithAuthenticationAndAuthorization does, without linking k8s.io/apiserver, which
// took 30 MB of the binary and 19 MiB of the manager's resident memory. Tokens are never logged: only a SHA-256 of
// one is kept, as a cache key.
func Filter(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	a := &metricsAuth{
		reviewToken: func(ctx context.Context, tr *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
			return authn.TokenReviews().Create(ctx, tr, metav1.CreateOptions{})
		},
		reviewAccess: func(ctx context.Context, sar *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
			return authz.SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		},
		now: time.Now,
	}
	return a.filter, nil
}

// metricsAuth asks the API server who a caller is and what it may do, and remembers the answers for a while.
type metricsAuth struct {
	reviewToken  func(context.Context, *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error)
	reviewAccess func(context.Context, *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error)
	now          func() time.Time

	users  ttlCache[authenticationv1.TokenReviewStatus] // by the SHA-256 of the token
	access ttlCache[bool]                               // by user, groups, extra, verb and path
}

func (a *metricsAuth) filter(log logr.Logger, next http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, ok := bearerToken(req)
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		status, err := a.authenticate(req.Context(), token)
		if err != nil {
			logFailure(log, req, err, "reviewing a metrics caller's token")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		}
		if !status.Authenticated {
			log.V(4).Info("metrics caller not authenticated", "error", status.Error)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(req.Method)
		allowed, err := a.authorize(req.Context(), status.User, verb, req.URL.Path)
		if err != nil {
			logFailure(log, req, err, "reviewing a metrics caller's access", "user", status.User.Username)
			http.Error(w, "Authorization for user "+status.User.Username+" failed", http.StatusInternalServerError)
			return
		}
		if !allowed {
			log.V(4).Info("metrics caller denied", "user", status.User.Username, "verb", verb, "path", req.URL.Path)
			http.Error(w, "Authorization denied for user "+status.User.Username, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req)
	}), nil
}

// logFailure logs a failed review as an error, unless the caller went away meanwhile (anyone can do that, so it is
// not worth more than a debug line).
func logFailure(log logr.Logger, req *http.Request, err error, msg string, kv ...any) {
	if req.Context().Err() != nil {
		log.V(4).Info(msg+": the caller went away", append(kv, "error", err.Error())...)
		return
	}
	log.Error(err, msg, kv...)
}

// bearerToken is the token of an "Authorization: Bearer" header.
func bearerToken(req *http.Request) (string, bool) {
	scheme, token, found := strings.Cut(req.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	return token, found && strings.EqualFold(scheme, "bearer") && token != ""
}

// authenticate is the API server's TokenReview of token, remembered for tokenReviewTTL.
func (a *metricsAuth) authenticate(ctx context.Context, token string) (authenticationv1.TokenReviewStatus, error) {
	sum := sha256.Sum256([]byte(token))
	key := string(sum[:])
	if status, ok := a.users.get(key, a.now()); ok {
		return status, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	tr, err := a.reviewToken(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}})
	if err != nil {
		return authenticationv1.TokenReviewStatus{}, err
	}
	// A review that failed on the server's side (its authenticator erred) is not remembered: it may pass next time.
	if tr.Status.Error == "" || tr.Status.Authenticated {
		a.users.put(key, tr.Status, a.now(), tokenReviewTTL)
	}
	return tr.Status, nil
}

// authorize is the API server's SubjectAccessReview of user doing verb on the non-resource URL path, remembered
// for allowedTTL when allowed and deniedTTL when not.
func (a *metricsAuth) authorize(ctx context.Context, user authenticationv1.UserInfo, verb, path string) (bool, error) {
	key := accessKey(user, verb, path)
	if allowed, ok := a.access.get(key, a.now()); ok {
		return allowed, nil
	}
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	sar, err := a.reviewAccess(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}})
	if err != nil {
		return false, err
	}
	allowed := sar.Status.Allowed && !sar.Status.Denied
	ttl := deniedTTL
	if allowed {
		ttl = allowedTTL
	}
	a.access.put(key, allowed, a.now(), ttl)
	return allowed, nil
}

// accessKey names everything a SubjectAccessReview is asked about, each part length-prefixed so that no two
// different questions share a key.
func accessKey(user authenticationv1.UserInfo, verb, path string) string {
	var b strings.Builder
	part := func(s string) { fmt.Fprintf(&b, "%d:%s", len(s), s) }
	list := func(l []string) {
		fmt.Fprintf(&b, "%d[", len(l))
		for _, s := range l {
			part(s)
		}
	}
	for _, s := range []string{user.Username, user.UID, verb, path} {
		part(s)
	}
	list(user.Groups)
	keys := slices.Sorted(maps.Keys(user.Extra))
	list(keys)
	for _, k := range keys {
		list(user.Extra[k])
	}
	return b.String()
}

// ttlCache is a map whose entries expire, of at most maxCached entries.
type ttlCache[V any] struct {
	mu sync.Mutex
	m  map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	value   V
	expires time.Time
}

func (c *ttlCache[V]) get(key string, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

func (c *ttlCache[V]) put(key string, v V, now time.Time, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]ttlEntry[V]{}
	}
	if len(c.m) >= maxCached {
		// Full: drop what expired, then, when that is not enough, entries at random (map order) down to three
		// quarters, so a flood of new callers evicts only part of what the regular ones need.
		maps.DeleteFunc(c.m, func(_ string, e ttlEntry[V]) bool { return !now.Before(e.expires) })
		for k := range c.m {
			if len(c.m) < maxCached*3/4 {
				break
			}
			delete(c.m, k)
		}
	}
	c.m[key] = ttlEntry[V]{value: v, expires: now.Add(ttl)}
}
