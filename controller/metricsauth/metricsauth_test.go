package metricsauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
)

// fakeReviews answers TokenReviews and SubjectAccessReviews as an API server would for two tokens: "reader-token"
// belongs to a user allowed GET /metrics, "stranger-token" to one allowed nothing; "broken-token" makes the review
// fail. It counts the reviews and keeps the last access review.
type fakeReviews struct {
	tokenReviews, accessReviews int
	lastAccess                  authorizationv1.SubjectAccessReviewSpec
}

func (f *fakeReviews) auth(now *time.Time) *metricsAuth {
	return &metricsAuth{
		reviewToken: func(_ context.Context, tr *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
			f.tokenReviews++
			switch tr.Spec.Token {
			case "broken-token":
				return nil, errors.New("the server is currently unable to handle the request")
			case "reader-token":
				tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
					Username: "system:serviceaccount:monitoring:prometheus", UID: "u1", Groups: []string{"system:serviceaccounts"},
					Extra: map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prometheus-0"}},
				}}
			case "stranger-token":
				tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "stranger"}}
			default:
				tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
			}
			return tr, nil
		},
		reviewAccess: func(_ context.Context, sar *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
			f.accessReviews++
			f.lastAccess = sar.Spec
			na := sar.Spec.NonResourceAttributes
			sar.Status.Allowed = sar.Spec.User == "system:serviceaccount:monitoring:prometheus" && na != nil && na.Verb == "get" && na.Path == "/metrics"
			return sar, nil
		},
		now: func() time.Time { return *now },
	}
}

func TestFilter(t *testing.T) {
	cases := []struct {
		name, method, header string
		want                 int
	}{
		{"no Authorization header", http.MethodGet, "", http.StatusUnauthorized},
		{"not a bearer token", http.MethodGet, "Basic cmVhZGVyOnB3", http.StatusUnauthorized},
		{"an empty bearer token", http.MethodGet, "Bearer ", http.StatusUnauthorized},
		{"a token the API server does not know", http.MethodGet, "Bearer forged-token", http.StatusUnauthorized},
		{"a user without the reader role", http.MethodGet, "Bearer stranger-token", http.StatusForbidden},
		{"the reader, with another verb", http.MethodPost, "Bearer reader-token", http.StatusForbidden},
		{"the reader", http.MethodGet, "Bearer reader-token", http.StatusOK},
		{"the reader, scheme in lower case", http.MethodGet, "bearer reader-token", http.StatusOK},
		{"the review fails", http.MethodGet, "Bearer broken-token", http.StatusInternalServerError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1e9, 0)
			var logged strings.Builder
			log := funcr.New(func(prefix, args string) { logged.WriteString(prefix + args + "\n") }, funcr.Options{Verbosity: 10})
			reached := false
			h, err := (&fakeReviews{}).auth(&now).filter(log, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(tc.method, "/metrics", nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want || reached != (tc.want == http.StatusOK) {
				t.Errorf("status %d (handler reached: %v), want %d", rec.Code, reached, tc.want)
			}
			if token := strings.TrimSpace(strings.TrimPrefix(strings.ToLower(tc.header), "bearer")); token != "" && strings.Contains(logged.String(), token) {
				t.Errorf("the token was logged: %s", logged.String())
			}
		})
	}
}

// The API server is asked once per token and question while its answer holds, with the caller's whole identity,
// and again when the answer expires.
func TestMetricsAuthAsksOnceWhileTheAnswerHolds(t *testing.T) {
	now := time.Unix(1e9, 0)
	f := &fakeReviews{}
	h, err := f.auth(&now).filter(logr.Discard(), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	if err != nil {
		t.Fatal(err)
	}
	get := func(token string) int {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	steps := []struct {
		after                time.Duration
		token                string
		want                 int
		tokenRevs, accessRev int
	}{
		{0, "reader-token", http.StatusOK, 1, 1},
		{30 * time.Second, "reader-token", http.StatusOK, 1, 1},
		{0, "stranger-token", http.StatusForbidden, 2, 2},
		{20 * time.Second, "stranger-token", http.StatusForbidden, 2, 2},
		{31 * time.Second, "reader-token", http.StatusOK, 3, 2},           // its token review expired (1 min); access holds (5 min)
		{0, "stranger-token", http.StatusForbidden, 3, 3},                 // its token review holds; the denial expired (30 s)
		{5 * time.Minute, "reader-token", http.StatusOK, 4, 4},            // both expired
		{0, "forged-token", http.StatusUnauthorized, 5, 4},                // not authenticated: no access review
		{10 * time.Second, "forged-token", http.StatusUnauthorized, 6, 4}, // a review that erred is not remembered
	}
	for i, s := range steps {
		now = now.Add(s.after)
		if code := get(s.token); code != s.want || f.tokenReviews != s.tokenRevs || f.accessReviews != s.accessRev {
			t.Fatalf("step %d (%s): status %d after %d token and %d access reviews, want %d after %d and %d",
				i, s.token, code, f.tokenReviews, f.accessReviews, s.want, s.tokenRevs, s.accessRev)
		}
	}
	want := authorizationv1.SubjectAccessReviewSpec{
		User: "system:serviceaccount:monitoring:prometheus", UID: "u1", Groups: []string{"system:serviceaccounts"},
		Extra:                 map[string]authorizationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prometheus-0"}},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}
	if got := f.lastAccess; got.User != want.User || got.UID != want.UID || strings.Join(got.Groups, ",") != strings.Join(want.Groups, ",") ||
		len(got.Extra) != 1 || got.Extra["authentication.kubernetes.io/pod-name"][0] != "prometheus-0" || *got.NonResourceAttributes != *want.NonResourceAttributes {
		t.Errorf("access review = %+v, want %+v", got, want)
	}
}

// Random tokens cannot grow the cache beyond maxCached entries.
func TestMetricsAuthCacheIsBounded(t *testing.T) {
	var c ttlCache[bool]
	now := time.Unix(1e9, 0)
	for i := range 3 * maxCached {
		c.put(strings.Repeat("k", i+1), true, now, time.Hour)
		if len(c.m) > maxCached {
			t.Fatalf("%d entries after %d puts", len(c.m), i+1)
		}
	}
}
