package checks

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestWebhookCheck: a webhook's answer is its value, no value (null, or no value field), or an error that fails
// the check; the request says which check of which canary it measures.
func TestWebhookCheck(t *testing.T) {
	cases := []struct {
		name    string
		status  int
		answer  string
		hang    bool
		noAuth  bool    // sent without the Authorization header
		want    float64 // NaN: no value
		wantErr string
	}{
		{name: "a value", answer: `{"value": 0.25}`, want: 0.25},
		{name: "a value among other fields", answer: `{"value": 3, "message": "p99 3 s"}`, want: 3},
		{name: "null: no value", answer: `{"value": null}`, want: math.NaN()},
		{name: "no value field: no value", answer: `{"verdict": "quiet"}`, want: math.NaN()},
		{name: "not a number", answer: `{"value": true}`, wantErr: `not an answer of the form {"value": <number or null>}`},
		{name: "an infinite number", answer: `{"value": 1e999}`, wantErr: "the value 1e999 is not a finite number"},
		{name: "an error page", status: http.StatusBadGateway, answer: `<html>502</html>`, wantErr: "webhook: 502 Bad Gateway"},
		{name: "a failed status with a value", status: http.StatusInternalServerError, answer: `{"value": 0}`, wantErr: "500"},
		{name: "HTML, said to be fine", answer: `<html>ok</html>`, wantErr: "not an answer of the form"},
		{name: "larger than 64 KiB", answer: `{"value": 0, "pad": "` + strings.Repeat("x", 70<<10) + `"}`, wantErr: "larger than 64 KiB"},
		{name: "no answer within its timeout", hang: true, wantErr: "context deadline exceeded"},
		{name: "without its header: refused", answer: `{"value": 0}`, noAuth: true, wantErr: "401"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got CheckRequest
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &got) != nil {
					http.Error(w, "want a POST of JSON", http.StatusBadRequest)
					return
				}
				if r.Header.Get("Authorization") != "Bearer s3cret" || r.Header.Get("X-Tenant") != "shop" {
					http.Error(w, "who are you?", http.StatusUnauthorized)
					return
				}
				if tc.hang {
					<-r.Context().Done()
					return
				}
				if tc.status != 0 {
					w.WriteHeader(tc.status)
				}
				_, _ = io.WriteString(w, tc.answer)
			}))
			defer srv.Close()
			req := NewCheckRequest()
			req.Namespace, req.WebApp, req.Check, req.CanaryRevision, req.StableRevision, req.Step, req.Weight = "shop", "web", "errors", "b", "a", 1, 50
			req.Time = time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
			start := time.Now()
			headers := http.Header{"Authorization": {"Bearer s3cret"}, "X-Tenant": {"shop"}}
			if tc.noAuth {
				headers = nil
			}
			r := Webhook(context.Background(), nil, srv.URL+"/judge", time.Second, headers, req)
			switch {
			case tc.wantErr != "":
				if r.Err == nil || !strings.Contains(r.Err.Error(), tc.wantErr) {
					t.Errorf("err %v, want one saying %q", r.Err, tc.wantErr)
				}
			case r.Err != nil:
				t.Errorf("err %v, want the value %v", r.Err, tc.want)
			case math.IsNaN(tc.want) != math.IsNaN(r.Value) || !math.IsNaN(tc.want) && r.Value != tc.want:
				t.Errorf("value %v, want %v", r.Value, tc.want)
			}
			if tc.hang && time.Since(start) > 3*time.Second {
				t.Errorf("a hanging webhook took %v; its timeout is 1 s", time.Since(start))
			}
			if got != req {
				t.Errorf("the webhook was told %+v, want %+v", got, req)
			}
		})
	}
}

// TestWebhookHeaderValueNeverSaid: a header value that cannot be sent (a Secret's, with a line break) fails the
// check by the header's name, never its value, and nothing is sent.
func TestWebhookHeaderValueNeverSaid(t *testing.T) {
	called := false
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
	defer srv.Close()
	r := Webhook(context.Background(), nil, srv.URL, time.Second, http.Header{"Authorization": {"Bearer s3cret\n"}}, NewCheckRequest())
	if r.Err == nil || !strings.Contains(r.Err.Error(), "header Authorization") || strings.Contains(r.Err.Error(), "s3cret") {
		t.Errorf("err %v, want one naming the header, not its value", r.Err)
	}
	if called {
		t.Errorf("the webhook was called with a header it cannot be sent")
	}
}

// TestWebhookRedirectNotFollowed: a redirect is the answer (a failure), never followed with the call's headers to
// wherever it points.
func TestWebhookRedirectNotFollowed(t *testing.T) {
	elsewhere := false
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhere = true
		_, _ = io.WriteString(w, `{"value": 0}`)
	}))
	defer other.Close()
	srv := httptest.NewServer(http.RedirectHandler(other.URL+"/steal", http.StatusTemporaryRedirect))
	defer srv.Close()
	r := Webhook(context.Background(), nil, srv.URL, time.Second, http.Header{"X-Api-Key": {"s3cret"}}, NewCheckRequest())
	if r.Err == nil || !strings.Contains(r.Err.Error(), "307") {
		t.Errorf("err %v, want the redirect's 307 as a failure", r.Err)
	}
	if elsewhere {
		t.Errorf("the redirect was followed")
	}
}
