package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/controller/checks"
)

// TestQueryChecksAtOnce: a round's checks (two Prometheus queries and a webhook) are queried at once, each answer in
// its check's place. The server answers none until all three have asked, so checks queried one after another fail
// at the round's bound instead.
func TestQueryChecksAtOnce(t *testing.T) {
	const n = 3
	var arrived sync.WaitGroup
	arrived.Add(n)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		select {
		case <-all:
		case <-r.Context().Done():
			return
		}
		if r.Method == http.MethodPost {
			// The webhook: its value is 3 when it was told which check of which canary it measures.
			var req checks.CheckRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Kind != "CheckRequest" || req.Check != "c2" || req.WebApp != "web" ||
				req.Namespace != "ns" || req.CanaryRevision != "b" || req.Weight != 10 {
				_, _ = fmt.Fprintf(w, `{"value": -1}`)
				return
			}
			_, _ = fmt.Fprintf(w, `{"value": 3}`)
			return
		}
		_, _ = fmt.Fprintf(w, `{"status":"success","data":{"resultType":"scalar","result":[1,%q]}}`, r.URL.Query().Get("query"))
	}))
	defer srv.Close()
	var checkSpecs []webappv2.CanaryCheck
	for i := range n - 1 {
		checkSpecs = append(checkSpecs, webappv2.CanaryCheck{Name: fmt.Sprint("c", i), Prometheus: &webappv2.PrometheusQuery{Address: srv.URL, Query: fmt.Sprint(i + 1)}})
	}
	checkSpecs = append(checkSpecs, webappv2.CanaryCheck{Name: "c2", Webhook: &webappv2.WebhookCheck{URL: srv.URL + "/judge"}})
	req := checks.NewCheckRequest()
	req.Namespace, req.WebApp, req.CanaryRevision, req.StableRevision, req.Weight = "ns", "web", "b", "a", 10
	// A bound of its own, shorter than checks.Timeout: one after another, the first would wait it out and fail.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	got := queryChecks(ctx, nil, checkSpecs, nil, nil, req, time.Now())
	if len(got) != n {
		t.Fatalf("%d results for %d checks", len(got), n)
	}
	for i, r := range got {
		if r.Err != nil || r.Value != float64(i+1) {
			t.Errorf("check %d: value %v, error %v; want the value %d", i, r.Value, r.Err, i+1)
		}
	}
}

// TestQueryChecksOfTheStepAlone: a check whose gates entry is false (a blue/green's check of its other part) is never
// queried; its result says it was skipped.
func TestQueryChecksOfTheStepAlone(t *testing.T) {
	var asked sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Store(r.URL.Query().Get("query"), true)
		_, _ = fmt.Fprintf(w, `{"status":"success","data":{"resultType":"scalar","result":[1,"7"]}}`)
	}))
	defer srv.Close()
	checkSpecs := []webappv2.CanaryCheck{
		{Name: "smoke", Prometheus: &webappv2.PrometheusQuery{Address: srv.URL, Query: "smoke"}, During: webappv2.DuringPreview},
		{Name: "errors", Prometheus: &webappv2.PrometheusQuery{Address: srv.URL, Query: "errors"}},
	}
	got := queryChecks(context.Background(), nil, checkSpecs, []bool{false, true}, nil, checks.NewCheckRequest(), time.Now())
	if _, ok := asked.Load("smoke"); ok {
		t.Error("the check not of this step was queried")
	}
	if len(got) != 2 || got[0] != (canary.CheckResult{Skipped: true}) || got[1].Value != 7 || got[1].Err != nil {
		t.Errorf("results %+v, want one skipped, then 7", got)
	}
}

// TestChecksWanted: a round is begun for a canary ready at its step, which a check gates, with no pod trouble, once its
// traffic has reached it: a second after the warm-up from when the step's pods were first seen ready, never in the
// reconcile that finds them ready (so a blue/green's checks of the keep never measure the preview).
func TestChecksWanted(t *testing.T) {
	t0 := time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC)
	checked := canary.Plan{Steps: []canary.Step{{Weight: 10}}, Checks: []canary.Check{{Name: "e"}}}
	keepOnly := canary.Plan{BlueGreen: true, Steps: []canary.Step{{Size: 100}, {Weight: 100, Size: 100}}, Checks: []canary.Check{{Name: "e", Steps: []int{1}}}}
	switched := keepOnly
	switched.Switched = true
	warm := t0.Add(canary.Warmup + time.Second)
	cases := []struct {
		name  string
		plan  canary.Plan
		state canary.State
		obs   canary.Observation
		now   time.Time
		want  bool
	}{
		{name: "ready, warmed up, no trouble: queried", plan: checked, state: canary.State{Since: t0}, obs: canary.Observation{CanaryReady: true}, now: warm, want: true},
		{name: "ready, in its warm-up: not yet", plan: checked, state: canary.State{Since: t0}, obs: canary.Observation{CanaryReady: true}, now: warm.Add(-time.Millisecond)},
		{name: "first seen ready in this reconcile: not yet", plan: checked, obs: canary.Observation{CanaryReady: true}, now: warm},
		{name: "no checks", plan: canary.Plan{Steps: checked.Steps}, state: canary.State{Since: t0}, obs: canary.Observation{CanaryReady: true}, now: warm},
		{name: "not ready at its step", plan: checked, state: canary.State{Since: t0}, now: warm},
		{name: "pod trouble decides first: not queried", plan: checked, state: canary.State{Since: t0}, obs: canary.Observation{CanaryReady: true, TroubleReason: webappv2.ReasonCrashLoopBackOff}, now: warm},
		{name: "a blue/green's preview, its only check the keep's: not queried", plan: keepOnly, state: canary.State{Since: t0}, obs: canary.Observation{CanaryReady: true}, now: warm},
		{name: "a blue/green's keep, its only check the keep's: queried", plan: keepOnly, state: canary.State{Step: 1, Since: t0}, obs: canary.Observation{CanaryReady: true}, now: warm, want: true},
		{name: "a blue/green's switch just found ready at full size: not yet", plan: keepOnly, state: canary.State{Step: 1}, obs: canary.Observation{CanaryReady: true}, now: warm},
		{name: "switched by the Service (no warm-up): a second after", plan: switched, state: canary.State{Step: 1, Since: t0}, obs: canary.Observation{CanaryReady: true}, now: t0.Add(time.Second), want: true},
		{name: "switched by the Service, the same second: not yet", plan: switched, state: canary.State{Step: 1, Since: t0}, obs: canary.Observation{CanaryReady: true}, now: t0.Add(999 * time.Millisecond)},
	}
	for _, c := range cases {
		if got := checksWanted(c.plan, c.state, c.obs, c.now); got != c.want {
			t.Errorf("%s: checksWanted = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestCheckRoundsRunApartFromTheReconcile: a round starts and returns at once, however long its checks take; its
// end wakes the WebApp, whose next reconcile takes the results once; no second round starts while one runs; a
// round of another canary or step is dropped.
func TestCheckRoundsRunApartFromTheReconcile(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	woke := make(chan types.NamespacedName, 1)
	c := &checkRounds{wake: func(k types.NamespacedName) { woke <- k }}
	release := make(chan struct{})
	t0 := time.Now()
	if !c.due(key, "b", 0, 10*time.Second, time.Time{}, t0) {
		t.Fatal("the first look at a step: not due")
	}
	began := time.Now()
	c.start(context.Background(), key, "b", 0, t0, func(context.Context) []canary.CheckResult { <-release; return []canary.CheckResult{{Value: 1}} })
	if d := time.Since(began); d > time.Second {
		t.Errorf("start held its caller %v", d)
	}
	if c.due(key, "b", 0, 10*time.Second, time.Time{}, t0.Add(time.Hour)) {
		t.Errorf("a second round due while one runs")
	}
	if _, ok := c.take(key, "b", 0); ok {
		t.Errorf("results taken before the round ended")
	}
	close(release)
	select {
	case k := <-woke:
		if k != key {
			t.Errorf("woke %v, want %v", k, key)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the round's end woke no one")
	}
	r, ok := c.take(key, "b", 0)
	if !ok || len(r.results) != 1 || r.results[0].Value != 1 || !r.at.Equal(t0) {
		t.Errorf("took %+v, %v; want the round's one result, started at %v", r, ok, t0)
	}
	if _, ok := c.take(key, "b", 0); ok {
		t.Errorf("a round's results taken twice")
	}
	// A round of step 0 taken at step 1 is dropped.
	c.due(key, "b", 0, 10*time.Second, time.Time{}, t0.Add(time.Hour))
	c.start(context.Background(), key, "b", 0, t0, func(context.Context) []canary.CheckResult { return []canary.CheckResult{{Value: 2}} })
	<-woke
	if _, ok := c.take(key, "b", 1); ok {
		t.Errorf("a round of another step taken")
	}
	// A round whose WebApp is forgotten meanwhile (deleted) leaves nothing behind.
	c.due(key, "b", 0, 10*time.Second, time.Time{}, t0.Add(2*time.Hour))
	c.start(context.Background(), key, "b", 0, t0, func(context.Context) []canary.CheckResult { return nil })
	c.forget(key)
	<-woke
	c.mu.Lock()
	left := len(c.done)
	c.mu.Unlock()
	if left != 0 {
		t.Errorf("%d rounds kept after their WebApp was forgotten", left)
	}
}
