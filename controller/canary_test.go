package controller

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	webappv2 "github.com/example/webapp-operator/apis/v2"
)

func TestNextCanary(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	steps := []canaryStep{{weight: 10, pause: time.Minute}, {weight: 50, pause: 2 * time.Minute}}
	check := canaryCheck{name: "errors", max: 0.05, interval: 10 * time.Second, failuresAllowed: 1}
	plain := canaryPlan{steps: steps}
	checked := canaryPlan{steps: steps, checks: []canaryCheck{check}}
	ok := []checkResult{{value: 0.01}}
	bad := []checkResult{{value: 0.3}}

	tests := []struct {
		name  string
		plan  canaryPlan
		state canaryState
		obs   canaryObservation
		now   time.Time
		want  canaryDecision
	}{{
		name: "a new WebApp: its first version is stable",
		plan: plain,
		obs:  canaryObservation{revision: "a"},
		want: canaryDecision{state: canaryState{stable: "a"}, phase: phaseStable},
	}, {
		name: "the strategy taken with a new version: what runs is stable, the spec's is the canary",
		plan: plain,
		obs:  canaryObservation{revision: "b", deployed: "a"},
		want: canaryDecision{state: canaryState{stable: "a", canary: "b"}, phase: phaseCanary, replicaWeight: 10},
	}, {
		name:  "at rest: nothing changes, no time to wait",
		plan:  checked,
		state: canaryState{stable: "a"},
		obs:   canaryObservation{revision: "a", deployed: "a"},
		want:  canaryDecision{state: canaryState{stable: "a"}, phase: phaseStable},
	}, {
		name:  "a new version starts at the first step",
		plan:  plain,
		state: canaryState{stable: "a"},
		obs:   canaryObservation{revision: "b", deployed: "a"},
		want:  canaryDecision{state: canaryState{stable: "a", canary: "b"}, phase: phaseCanary, replicaWeight: 10},
	}, {
		name:  "a new version while no stable Deployment runs (the API refused the stable one): stable at once, no canary beside what cannot run",
		plan:  plain,
		state: canaryState{stable: "a"},
		obs:   canaryObservation{revision: "b"},
		want:  canaryDecision{state: canaryState{stable: "b"}, phase: phaseStable},
	}, {
		name:  "a new version after a rollback, no stable Deployment running: stable at once, the failed one still known",
		plan:  plain,
		state: canaryState{stable: "a", failed: "x", reason: webappv2.ReasonCheckFailed},
		obs:   canaryObservation{revision: "b"},
		want:  canaryDecision{state: canaryState{stable: "b", failed: "x", reason: webappv2.ReasonCheckFailed}, phase: phaseStable},
	}, {
		name:  "a pod trouble seen as the canary starts is the old version's: not a rollback",
		plan:  plain,
		state: canaryState{stable: "a"},
		obs:   canaryObservation{revision: "b", deployed: "a", troubleReason: webappv2.ReasonCrashLoopBackOff},
		want:  canaryDecision{state: canaryState{stable: "a", canary: "b"}, phase: phaseCanary, replicaWeight: 10},
	}, {
		name:  "the canary not ready yet: its pause has not started",
		plan:  plain,
		state: canaryState{stable: "a", canary: "b"},
		obs:   canaryObservation{revision: "b", deployed: "a"},
		now:   t0,
		want:  canaryDecision{state: canaryState{stable: "a", canary: "b"}, phase: phaseCanary, replicaWeight: 10},
	}, {
		name:  "the canary ready: its pause starts now; its weight once the gateway knows its pods",
		plan:  plain,
		state: canaryState{stable: "a", canary: "b"},
		obs:   canaryObservation{revision: "b", deployed: "a", canaryReady: true},
		now:   t0,
		want:  canaryDecision{state: canaryState{stable: "a", canary: "b", since: t0}, phase: phaseCanary, replicaWeight: 10, after: canaryWarmup},
	}, {
		name:  "warmed up: its weight, the pause ending a minute after it started",
		plan:  plain,
		state: canaryState{stable: "a", canary: "b", since: t0},
		obs:   canaryObservation{revision: "b", deployed: "a", canaryReady: true},
		now:   t0.Add(canaryWarmup),
		want:  canaryDecision{state: canaryState{stable: "a", canary: "b", since: t0}, phase: phaseCanary, weight: 10, replicaWeight: 10, after: time.Minute - canaryWarmup},
	}, {
		name:  "pausing: the state is unchanged (no write), the next look at the check's interval",
		plan:  checked,
		state: canaryState{stable: "a", canary: "b", since: t0},
		obs:   canaryObservation{revision: "b", deployed: "a", canaryReady: true, checks: ok},
		now:   t0.Add(30 * time.Second),
		want:  canaryDecision{state: canaryState{stable: "a", canary: "b", since: t0}, phase: phaseCanary, weight: 10, replicaWeight: 10, after: 10 * time.Second},
	}, {
		name:  "the pause over: the next step, whose pause starts when the canary is ready at its weight",
		plan:  plain,
		state: canaryState{stable: "a", canary: "b", since: t0},
		obs:   canaryObservation{revision: "b", deployed: "a", canaryReady: true},
		now:   t0.Add(time.Minute),
		want:  canaryDecision{state: canaryState{stable: "a", canary: "b", step: 1}, phase: phaseCanary, weight: 10, replicaWeight: 50},
	}, {
		name:  "the pause over with a check due but not taken: wait for it",
		plan:  checked,
		state: canaryState{stable: "a", canary: "b", since: t0},
		obs:   canaryObservation{revision: "b", deployed: "a", canaryReady: true},
		now:   t0.Add(time.Minute),
		want:  canaryDecision{state: canaryState{stable: "a", canary: "b", since: t0}, phase: phaseCanary, weight: 10, replicaWeight: 10, after: 10 * time.Second},
	}, {
		name:  "the pause over and the check passing, taken after it: the next step",
		plan:  checked,
		state: canaryState{stable: "a", canary: "b", since: t0},
		obs:   canaryObservation{revision: "b", deployed: "a", canaryReady: true, checks: ok, checksAt: t0.Add(time.Minute)},
		now:   t0.Add(time.Minute + time.Second),
		want:  canaryDecision{state: canaryState{stable: "a", canary: "b", step: 1}, phase: phaseCanary, weight: 10, replicaWeight: 50},
	}, {
		name:  "the pause over, the check passing in a round begun before its end: wait for one begun after it",
		plan:  checked,
		state: canaryState{stable: "a", canary: "b", since: t0},
		obs:   canaryObservation{revision: "b", deployed: "a", canaryReady: true, checks: ok, checksAt: t0.Add(time.Minute - time.Second)},
		now:   t0.Add(time.Minute + time.Second),
		want:  canaryDecision{state: canaryState{stable: "a", canary: "b", since: t0}, phase: phaseCanary, weight: 10, replicaWeight: 10, after: 10 * time.Second},
	}, {
		name:  "a failure within the allowed: counted (a write), the step holds",
		plan:  checked,
		state: canaryState{stable: "a", canary: "b", since: t0},
		obs:   canaryObservation{revision: "b", deployed: "a", canaryReady: true, checks: bad},
		now:   t0.Add(time.Minute),
		want:  canaryDecision{state: canaryState{stable: "a", canary: "b", since: t0, failures: []int32{1}}, phase: phaseCanary, weight: 10, replicaWeight: 10, after: 10 * time.Second},
	}, {
		name:  "one failure more than allowed: rolled back, with the check's value",
		plan:  checked,
		state: canaryState{stable: "a", canary: "b", since: t0, failures: []int32{1}},
		obs:   canaryObservation{revision: "b", deployed: "a", canaryReady: true, checks: bad},
		now:   t0.Add(20 * time.Second),
		want: canaryDecision{state: canaryState{stable: "a", failed: "b", since: t0.Add(20 * time.Second), reason: webappv2.ReasonCheckFailed,
			message: "check errors: 0.3 > 0.05 (failures 2, allowed 1)"}, phase: phaseRolledBack, replicaWeight: 10, after: canaryRetire},
	}, {
		name:  "a check that cannot be evaluated fails",
		plan:  canaryPlan{steps: steps, checks: []canaryCheck{{name: "errors", max: 0.05, interval: time.Second}}},
		state: canaryState{stable: "a", canary: "b", since: t0},
		obs:   canaryObservation{revision: "b", deployed: "a", canaryReady: true, checks: []checkResult{{err: errors.New("prometheus: connection refused")}}},
		now:   t0,
		want: canaryDecision{state: canaryState{stable: "a", failed: "b", since: t0, reason: webappv2.ReasonCheckFailed,
			message: "check errors: prometheus: connection refused (failures 1, allowed 0)"}, phase: phaseRolledBack, replicaWeight: 10, after: canaryRetire},
	}, {
		name:  "an empty result fails",
		plan:  canaryPlan{steps: steps, checks: []canaryCheck{{name: "errors", max: 0.05, interval: time.Second}}},
		state: canaryState{stable: "a", canary: "b", since: t0},
		obs:   canaryObservation{revision: "b", deployed: "a", canaryReady: true, checks: []checkResult{{value: math.NaN()}}},
		now:   t0,
		want: canaryDecision{state: canaryState{stable: "a", failed: "b", since: t0, reason: webappv2.ReasonCheckFailed,
			message: "check errors: no value (failures 1, allowed 0)"}, phase: phaseRolledBack, replicaWeight: 10, after: canaryRetire},
	}, {
		name:  "-Inf fails: below every max, yet no measurement",
		plan:  canaryPlan{steps: steps, checks: []canaryCheck{{name: "errors", max: 0.05, interval: time.Second}}},
		state: canaryState{stable: "a", canary: "b", since: t0},
		obs:   canaryObservation{revision: "b", deployed: "a", canaryReady: true, checks: []checkResult{{value: math.Inf(-1)}}},
		now:   t0,
		want: canaryDecision{state: canaryState{stable: "a", failed: "b", since: t0, reason: webappv2.ReasonCheckFailed,
			message: "check errors: -Inf is not a finite number (failures 1, allowed 0)"}, phase: phaseRolledBack, replicaWeight: 10, after: canaryRetire},
	}, {
		name:  "+Inf fails",
		plan:  canaryPlan{steps: steps, checks: []canaryCheck{{name: "errors", max: 0.05, interval: time.Second}}},
		state: canaryState{stable: "a", canary: "b", since: t0},
		obs:   canaryObservation{revision: "b", deployed: "a", canaryReady: true, checks: []checkResult{{value: math.Inf(1)}}},
		now:   t0,
		want: canaryDecision{state: canaryState{stable: "a", failed: "b", since: t0, reason: webappv2.ReasonCheckFailed,
			message: "check errors: +Inf is not a finite number (failures 1, allowed 0)"}, phase: phaseRolledBack, replicaWeight: 10, after: canaryRetire},
	}, {
		name:  "the canary's pods crash-loop: rolled back at once, whatever the step",
		plan:  checked,
		state: canaryState{stable: "a", canary: "b", step: 1, since: t0},
		obs:   canaryObservation{revision: "b", deployed: "a", troubleReason: webappv2.ReasonCrashLoopBackOff, troubleMessage: "1/1 pods: back-off restarting app"},
		now:   t0,
		want: canaryDecision{state: canaryState{stable: "a", failed: "b", step: 1, since: t0, reason: webappv2.ReasonCrashLoopBackOff,
			message: "1/1 pods: back-off restarting app"}, phase: phaseRolledBack, replicaWeight: 50, after: canaryRetire},
	}, {
		name:  "rolled back: the canary's pods go once the traffic has left them",
		plan:  plain,
		state: canaryState{stable: "a", failed: "b", step: 1, since: t0, reason: webappv2.ReasonCrashLoopBackOff},
		obs:   canaryObservation{revision: "b", deployed: "a"},
		now:   t0.Add(canaryRetire),
		want:  canaryDecision{state: canaryState{stable: "a", failed: "b", reason: webappv2.ReasonCrashLoopBackOff}, phase: phaseRolledBack},
	}, {
		name:  "a new version while one is promoted: the promoted one is stable, the new one its canary",
		plan:  plain,
		state: canaryState{stable: "a", canary: "b", step: 2},
		obs:   canaryObservation{revision: "c", deployed: "b"},
		want:  canaryDecision{state: canaryState{stable: "b", canary: "c"}, phase: phaseCanary, replicaWeight: 10},
	}, {
		name:  "the rolled-back version applied again: it stays rolled back (no loop)",
		plan:  plain,
		state: canaryState{stable: "a", failed: "b", reason: webappv2.ReasonCrashLoopBackOff},
		obs:   canaryObservation{revision: "b", deployed: "a"},
		want:  canaryDecision{state: canaryState{stable: "a", failed: "b", reason: webappv2.ReasonCrashLoopBackOff}, phase: phaseRolledBack},
	}, {
		name:  "a new version after a rollback: a new canary, the failed one still known",
		plan:  plain,
		state: canaryState{stable: "a", failed: "b", reason: webappv2.ReasonCrashLoopBackOff, message: "m"},
		obs:   canaryObservation{revision: "c", deployed: "a"},
		want:  canaryDecision{state: canaryState{stable: "a", canary: "c", failed: "b"}, phase: phaseCanary, replicaWeight: 10},
	}, {
		name:  "the spec set back to stable mid-canary: the canary is dropped, stable serves",
		plan:  plain,
		state: canaryState{stable: "a", canary: "b", step: 1, since: t0, failures: []int32{1}},
		obs:   canaryObservation{revision: "a", deployed: "a"},
		want:  canaryDecision{state: canaryState{stable: "a"}, phase: phaseStable},
	}, {
		name:  "the version changed mid-canary: the new one starts from the first step",
		plan:  plain,
		state: canaryState{stable: "a", canary: "b", step: 1, since: t0},
		obs:   canaryObservation{revision: "c", deployed: "a", canaryReady: true},
		want:  canaryDecision{state: canaryState{stable: "a", canary: "c"}, phase: phaseCanary, replicaWeight: 10},
	}, {
		name:  "the last pause over: promoting, the canary keeping its weight while stable rolls",
		plan:  plain,
		state: canaryState{stable: "a", canary: "b", step: 1, since: t0},
		obs:   canaryObservation{revision: "b", deployed: "a", canaryReady: true},
		now:   t0.Add(2 * time.Minute),
		want:  canaryDecision{state: canaryState{stable: "a", canary: "b", step: 2}, phase: phasePromoting, weight: 50, replicaWeight: 50},
	}, {
		name:  "promoting: a crash seen now is not the canary's to roll back",
		plan:  plain,
		state: canaryState{stable: "a", canary: "b", step: 2},
		obs:   canaryObservation{revision: "b", deployed: "b", troubleReason: webappv2.ReasonCrashLoopBackOff},
		want:  canaryDecision{state: canaryState{stable: "a", canary: "b", step: 2}, phase: phasePromoting, weight: 50, replicaWeight: 50},
	}, {
		name:  "stable rolled out: the traffic leaves the canary, whose pods stay a moment longer",
		plan:  plain,
		state: canaryState{stable: "a", canary: "b", step: 2, failed: "x"},
		obs:   canaryObservation{revision: "b", deployed: "b", stableRolledOut: true},
		now:   t0,
		want:  canaryDecision{state: canaryState{stable: "a", canary: "b", step: 2, failed: "x", since: t0}, phase: phasePromoting, replicaWeight: 50, after: canaryRetire},
	}, {
		name:  "promoted: the new version is stable, the canary and the failed record gone",
		plan:  plain,
		state: canaryState{stable: "a", canary: "b", step: 2, failed: "x", since: t0},
		obs:   canaryObservation{revision: "b", deployed: "b", stableRolledOut: true},
		now:   t0.Add(canaryRetire),
		want:  canaryDecision{state: canaryState{stable: "b"}, phase: phaseStable},
	}, {
		name:  "no steps: the new version is promoted at once",
		plan:  canaryPlan{},
		state: canaryState{stable: "a"},
		obs:   canaryObservation{revision: "b", deployed: "a"},
		want:  canaryDecision{state: canaryState{stable: "a", canary: "b"}, phase: phasePromoting},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := nextCanary(tt.plan, tt.state, tt.obs, tt.now)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("nextCanary:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestCanaryRestartResumes: the state alone (as the status keeps it) carries a canary through its steps, each
// pause counted from the state's own start, so a reconcile after a restart continues where the last one left.
func TestCanaryRestartResumes(t *testing.T) {
	plan := canaryPlan{steps: []canaryStep{{weight: 20, pause: time.Minute}, {weight: 60, pause: time.Minute}}}
	now := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	s := canaryState{stable: "a"}
	var weights []int32
	for i := 0; i < 12; i++ {
		obs := canaryObservation{revision: "b", deployed: "a", canaryReady: i > 0}
		if s.step >= len(plan.steps) {
			obs.deployed, obs.stableRolledOut = "b", true
		}
		d := nextCanary(plan, s, obs, now)
		// (Within a step: a new step's readiness is another observation.)
		if again := nextCanary(plan, d.state, obs, now); again.weight != d.weight && again.phase == d.phase && d.state.step == s.step {
			t.Fatalf("look %d: deciding again from the new state at the same moment moved the traffic: %+v then %+v", i, d, again)
		}
		s = d.state
		weights = append(weights, d.weight)
		if d.phase == phaseStable && s.stable == "b" {
			break
		}
		now = now.Add(30 * time.Second)
	}
	if s.stable != "b" || s.canary != "" {
		t.Fatalf("not promoted: %+v, weights %v", s, weights)
	}
	// (Each look 30 s after the last: a step's first ready look is within its warm-up, at the weight before.)
	want := []int32{0, 0, 20, 20, 20, 60, 60, 0, 0}
	if !reflect.DeepEqual(weights, want) {
		t.Errorf("weights %v, want %v", weights, want)
	}
}
