package canary

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	webappv2 "github.com/example/webapp-operator/apis/v2"
)

func TestNextCanary(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	steps := []Step{{Weight: 10, Pause: time.Minute}, {Weight: 50, Pause: 2 * time.Minute}}
	check := Check{Name: "errors", Max: 0.05, Interval: 10 * time.Second, FailuresAllowed: 1}
	plain := Plan{Steps: steps}
	checked := Plan{Steps: steps, Checks: []Check{check}}
	ok := []CheckResult{{Value: 0.01}}
	bad := []CheckResult{{Value: 0.3}}
	// gated is a plan whose first step has a gate.
	gated := func(timeout time.Duration, onTimeout webappv2.GateTimeout) Plan {
		return Plan{Steps: []Step{{Weight: 10, Pause: time.Minute, Gate: true, GateTimeout: timeout, OnTimeout: onTimeout}, steps[1]}}
	}
	// evaluated is the check's record of a round begun at at.
	evaluated := func(value string, passed bool, err string, at time.Time) []Evaluation {
		return []Evaluation{{Name: "errors", Value: value, Max: "0.05", Passed: passed, Error: err, At: at}}
	}

	tests := []nextCase{{
		name: "a new WebApp: its first version is stable",
		plan: plain,
		obs:  Observation{Revision: "a"},
		want: Decision{State: State{Stable: "a"}, Phase: PhaseStable},
	}, {
		name: "the strategy taken with a new version: what runs is stable, the spec's is the canary",
		plan: plain,
		obs:  Observation{Revision: "b", Deployed: "a"},
		want: Decision{State: State{Stable: "a", Canary: "b"}, Phase: PhaseCanary, ReplicaWeight: 10},
	}, {
		name:  "at rest: nothing changes, no time to wait",
		plan:  checked,
		state: State{Stable: "a"},
		obs:   Observation{Revision: "a", Deployed: "a"},
		want:  Decision{State: State{Stable: "a"}, Phase: PhaseStable},
	}, {
		name:  "a new version starts at the first step",
		plan:  plain,
		state: State{Stable: "a"},
		obs:   Observation{Revision: "b", Deployed: "a"},
		want:  Decision{State: State{Stable: "a", Canary: "b"}, Phase: PhaseCanary, ReplicaWeight: 10},
	}, {
		name:  "a new version while no stable Deployment runs (the API refused the stable one): stable at once, no canary beside what cannot run",
		plan:  plain,
		state: State{Stable: "a"},
		obs:   Observation{Revision: "b"},
		want:  Decision{State: State{Stable: "b"}, Phase: PhaseStable},
	}, {
		name:  "a new version after a rollback, no stable Deployment running: stable at once, the failed one still known",
		plan:  plain,
		state: State{Stable: "a", Failed: "x", Reason: webappv2.ReasonCheckFailed},
		obs:   Observation{Revision: "b"},
		want:  Decision{State: State{Stable: "b", Failed: "x", Reason: webappv2.ReasonCheckFailed}, Phase: PhaseStable},
	}, {
		name:  "a pod trouble seen as the canary starts is the old version's: not a rollback",
		plan:  plain,
		state: State{Stable: "a"},
		obs:   Observation{Revision: "b", Deployed: "a", TroubleReason: webappv2.ReasonCrashLoopBackOff},
		want:  Decision{State: State{Stable: "a", Canary: "b"}, Phase: PhaseCanary, ReplicaWeight: 10},
	}, {
		name:  "the canary not ready yet: its pause has not started",
		plan:  plain,
		state: State{Stable: "a", Canary: "b"},
		obs:   Observation{Revision: "b", Deployed: "a"},
		now:   t0,
		want:  Decision{State: State{Stable: "a", Canary: "b"}, Phase: PhaseCanary, ReplicaWeight: 10},
	}, {
		name:  "the canary ready: its pause starts now; its weight once the gateway knows its pods",
		plan:  plain,
		state: State{Stable: "a", Canary: "b"},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t0,
		want:  Decision{State: State{Stable: "a", Canary: "b", Since: t0}, Phase: PhaseCanary, ReplicaWeight: 10, After: Warmup},
	}, {
		name:  "warmed up: its weight, the pause ending a minute after it started",
		plan:  plain,
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t0.Add(Warmup),
		want:  Decision{State: State{Stable: "a", Canary: "b", Since: t0}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 10, After: time.Minute - Warmup},
	}, {
		name:  "pausing, a round ended: its values recorded (a write a round), the next look at the check's interval",
		plan:  checked,
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Checks: ok, ChecksAt: t0},
		now:   t0.Add(30 * time.Second),
		want: Decision{State: State{Stable: "a", Canary: "b", Since: t0, Evaluations: evaluated("0.01", true, "", t0)}, Phase: PhaseCanary,
			Traffic: Traffic{Weight: 10}, ReplicaWeight: 10, After: 10 * time.Second},
	}, {
		name:  "the pause over: the next step, whose pause starts when the canary is ready at its weight",
		plan:  plain,
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t0.Add(time.Minute),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 1}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 50},
	}, {
		name:  "the pause over with a check due but not taken: wait for it",
		plan:  checked,
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t0.Add(time.Minute),
		want:  Decision{State: State{Stable: "a", Canary: "b", Since: t0}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 10, After: 10 * time.Second},
	}, {
		name:  "the pause over and the check passing, taken after it: the next step",
		plan:  checked,
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Checks: ok, ChecksAt: t0.Add(time.Minute)},
		now:   t0.Add(time.Minute + time.Second),
		want: Decision{State: State{Stable: "a", Canary: "b", Step: 1, Evaluations: evaluated("0.01", true, "", t0.Add(time.Minute))}, Phase: PhaseCanary,
			Traffic: Traffic{Weight: 10}, ReplicaWeight: 50},
	}, {
		name:  "the pause over, the check passing in a round begun before its end: wait for one begun after it",
		plan:  checked,
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Checks: ok, ChecksAt: t0.Add(time.Minute - time.Second)},
		now:   t0.Add(time.Minute + time.Second),
		want: Decision{State: State{Stable: "a", Canary: "b", Since: t0, Evaluations: evaluated("0.01", true, "", t0.Add(time.Minute-time.Second))}, Phase: PhaseCanary,
			Traffic: Traffic{Weight: 10}, ReplicaWeight: 10, After: 10 * time.Second},
	}, {
		name:  "a failure within the allowed: counted (a write), the step holds",
		plan:  checked,
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Checks: bad, ChecksAt: t0},
		now:   t0.Add(time.Minute),
		want: Decision{State: State{Stable: "a", Canary: "b", Since: t0, Failures: []int32{1}, Evaluations: evaluated("0.3", false, "", t0)}, Phase: PhaseCanary,
			Traffic: Traffic{Weight: 10}, ReplicaWeight: 10, After: 10 * time.Second},
	}, {
		name:  "one failure more than allowed: rolled back, with the check's value",
		plan:  checked,
		state: State{Stable: "a", Canary: "b", Since: t0, Failures: []int32{1}},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Checks: bad, ChecksAt: t0},
		now:   t0.Add(20 * time.Second),
		want: Decision{State: State{Stable: "a", Failed: "b", Since: t0.Add(20 * time.Second), Reason: webappv2.ReasonCheckFailed,
			Message: "check errors: 0.3 > 0.05 (failures 2, allowed 1)", Evaluations: evaluated("0.3", false, "", t0)}, Phase: PhaseRolledBack, ReplicaWeight: 10, After: Retire},
	}, {
		name:  "a check that cannot be evaluated fails",
		plan:  Plan{Steps: steps, Checks: []Check{{Name: "errors", Max: 0.05, Interval: time.Second}}},
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Checks: []CheckResult{{Err: errors.New("prometheus: connection refused")}}, ChecksAt: t0},
		now:   t0,
		want: Decision{State: State{Stable: "a", Failed: "b", Since: t0, Reason: webappv2.ReasonCheckFailed,
			Message: "check errors: prometheus: connection refused (failures 1, allowed 0)", Evaluations: evaluated("", false, "prometheus: connection refused", t0)}, Phase: PhaseRolledBack, ReplicaWeight: 10, After: Retire},
	}, {
		name:  "an empty result fails",
		plan:  Plan{Steps: steps, Checks: []Check{{Name: "errors", Max: 0.05, Interval: time.Second}}},
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Checks: []CheckResult{{Value: math.NaN()}}, ChecksAt: t0},
		now:   t0,
		want: Decision{State: State{Stable: "a", Failed: "b", Since: t0, Reason: webappv2.ReasonCheckFailed,
			Message: "check errors: no value (failures 1, allowed 0)", Evaluations: evaluated("", false, "no value", t0)}, Phase: PhaseRolledBack, ReplicaWeight: 10, After: Retire},
	}, {
		name:  "no value under onNoData Pass: passes, and the evaluation says so; the pause over, the next step",
		plan:  Plan{Steps: steps, Checks: []Check{{Name: "errors", Max: 0.05, Interval: time.Second, NoData: webappv2.NoDataPass}}},
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Checks: []CheckResult{{Value: math.NaN()}}, ChecksAt: t0.Add(time.Minute)},
		now:   t0.Add(time.Minute + time.Second),
		want: Decision{State: State{Stable: "a", Canary: "b", Step: 1, Evaluations: evaluated("", true, "no value, passed (onNoData: Pass)", t0.Add(time.Minute))},
			Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 50},
	}, {
		name:  "no value under onNoData Wait, within its bound: the step holds past its pause, no failure counted",
		plan:  Plan{Steps: steps, Checks: []Check{{Name: "errors", Max: 0.05, Interval: time.Second, NoData: webappv2.NoDataWait, NoDataWait: 30 * time.Second}}},
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Checks: []CheckResult{{Value: math.NaN()}}, ChecksAt: t0.Add(time.Minute)},
		now:   t0.Add(time.Minute + time.Second),
		want: Decision{State: State{Stable: "a", Canary: "b", Since: t0, Evaluations: []Evaluation{{Name: "errors", Max: "0.05", At: t0.Add(time.Minute), NoDataSince: t0.Add(time.Minute),
			Error: "no value since 2026-12-03T08:01:00Z, waiting up to 30s (onNoData: Wait)"}}}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 10, After: time.Second},
	}, {
		name:  "no value under onNoData Wait, its bound reached: a failure, rolled back (never held for ever)",
		plan:  Plan{Steps: steps, Checks: []Check{{Name: "errors", Max: 0.05, Interval: time.Second, NoData: webappv2.NoDataWait, NoDataWait: 30 * time.Second}}},
		state: State{Stable: "a", Canary: "b", Since: t0, Evaluations: []Evaluation{{Name: "errors", Max: "0.05", At: t0.Add(time.Minute), NoDataSince: t0.Add(time.Minute)}}},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Checks: []CheckResult{{Value: math.NaN()}}, ChecksAt: t0.Add(90 * time.Second)},
		now:   t0.Add(91 * time.Second),
		want: Decision{State: State{Stable: "a", Failed: "b", Since: t0.Add(91 * time.Second), Reason: webappv2.ReasonCheckFailed,
			Message:     "check errors: no value for 30s (onNoData: Wait) (failures 1, allowed 0)",
			Evaluations: []Evaluation{{Name: "errors", Max: "0.05", At: t0.Add(90 * time.Second), NoDataSince: t0.Add(time.Minute), Error: "no value for 30s (onNoData: Wait)"}}},
			Phase: PhaseRolledBack, ReplicaWeight: 10, After: Retire},
	}, {
		name:  "a value after waiting for one: the wait is over, the value decides",
		plan:  Plan{Steps: steps, Checks: []Check{{Name: "errors", Max: 0.05, Interval: time.Second, NoData: webappv2.NoDataWait, NoDataWait: 30 * time.Second}}},
		state: State{Stable: "a", Canary: "b", Since: t0, Evaluations: []Evaluation{{Name: "errors", Max: "0.05", At: t0.Add(time.Minute), NoDataSince: t0.Add(time.Minute)}}},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Checks: ok, ChecksAt: t0.Add(70 * time.Second)},
		now:   t0.Add(71 * time.Second),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 1, Evaluations: evaluated("0.01", true, "", t0.Add(70*time.Second))}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 50},
	}, {
		name:  "a gate: its pause over, the step waits for a person from now, on events only",
		plan:  gated(0, ""),
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t0.Add(time.Minute),
		want:  Decision{State: State{Stable: "a", Canary: "b", Since: t0, GateSince: t0.Add(time.Minute)}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 10},
	}, {
		name:  "a gate without a timeout: still waiting a day later (no write: the state is unchanged)",
		plan:  gated(0, ""),
		state: State{Stable: "a", Canary: "b", Since: t0, GateSince: t0.Add(time.Minute)},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t0.Add(24 * time.Hour),
		want:  Decision{State: State{Stable: "a", Canary: "b", Since: t0, GateSince: t0.Add(time.Minute)}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 10},
	}, {
		name:  "a gate promoted by a person (this step): the next step",
		plan:  gated(0, ""),
		state: State{Stable: "a", Canary: "b", Since: t0, GateSince: t0.Add(time.Minute)},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "promote b/0"},
		now:   t0.Add(time.Hour),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 1, ActedOn: "promote b/0"}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 50},
	}, {
		name:  "a promotion of another step, or of another revision, acts on nothing",
		plan:  gated(0, ""),
		state: State{Stable: "a", Canary: "b", Since: t0, GateSince: t0.Add(time.Minute)},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "promote x/0"},
		now:   t0.Add(time.Hour),
		want:  Decision{State: State{Stable: "a", Canary: "b", Since: t0, GateSince: t0.Add(time.Minute)}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 10},
	}, {
		name:  "a gate's timeout, by default: rolled back, saying so",
		plan:  gated(time.Hour, ""),
		state: State{Stable: "a", Canary: "b", Since: t0, GateSince: t0.Add(time.Minute)},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t0.Add(61 * time.Minute),
		want: Decision{State: State{Stable: "a", Failed: "b", Since: t0.Add(61 * time.Minute), Reason: webappv2.ReasonGateTimedOut,
			Message: "no one promoted step 0 within its gate's 1h0m0s"}, Phase: PhaseRolledBack, ReplicaWeight: 10, After: Retire},
	}, {
		name:  "a gate's timeout that promotes: the next step",
		plan:  gated(time.Hour, webappv2.GatePromote),
		state: State{Stable: "a", Canary: "b", Since: t0, GateSince: t0.Add(time.Minute)},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t0.Add(61 * time.Minute),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 1}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 50},
	}, {
		name:  "a gate with a timeout, before it: the next look at the timeout",
		plan:  gated(time.Hour, ""),
		state: State{Stable: "a", Canary: "b", Since: t0, GateSince: t0.Add(time.Minute)},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t0.Add(31 * time.Minute),
		want:  Decision{State: State{Stable: "a", Canary: "b", Since: t0, GateSince: t0.Add(time.Minute)}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 10, After: 30 * time.Minute},
	}, {
		name:  "a step promoted mid-pause: it passes now",
		plan:  plain,
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "promote b/0"},
		now:   t0.Add(10 * time.Second),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 1, ActedOn: "promote b/0"}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 50},
	}, {
		name:  "a step promoted before its pods are ready: it waits for them (never traffic to pods not ready)",
		plan:  plain,
		state: State{Stable: "a", Canary: "b"},
		obs:   Observation{Revision: "b", Deployed: "a", Action: "promote b/0"},
		now:   t0,
		want:  Decision{State: State{Stable: "a", Canary: "b"}, Phase: PhaseCanary, ReplicaWeight: 10},
	}, {
		name:  "promoted all the way from a pause: each step passes once its pods are ready and warmed up, the next one now",
		plan:  gated(0, ""),
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "promote b/full"},
		now:   t0.Add(10 * time.Second),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 1, ActedOn: "promote b/full"}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 50},
	}, {
		name:  "promoted all the way, the last step's pods ready but not warmed up: its weight waits for the gateway",
		plan:  gated(0, ""),
		state: State{Stable: "a", Canary: "b", Step: 1, ActedOn: "promote b/full"},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "promote b/full"},
		now:   t0,
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 1, Since: t0, ActedOn: "promote b/full"}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 50, After: Warmup},
	}, {
		name:  "promoted all the way, the last step warmed up: promoting, its pause waived",
		plan:  gated(0, ""),
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t0, ActedOn: "promote b/full"},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "promote b/full"},
		now:   t0.Add(Warmup),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 2, ActedOn: "promote b/full"}, Phase: PhasePromoting, Traffic: Traffic{Weight: 50}, ReplicaWeight: 50},
	}, {
		name:  "a step promoted as its pods are ready, before the gateway knows them: the action waits for the warm-up",
		plan:  plain,
		state: State{Stable: "a", Canary: "b"},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "promote b/0"},
		now:   t0,
		want:  Decision{State: State{Stable: "a", Canary: "b", Since: t0}, Phase: PhaseCanary, ReplicaWeight: 10, After: Warmup},
	}, {
		name:  "a round begun before this attempt's pods were ready (an aborted attempt's, before a retry): dropped",
		plan:  checked,
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Checks: bad, ChecksAt: t0.Add(-time.Minute)},
		now:   t0.Add(10 * time.Second),
		want:  Decision{State: State{Stable: "a", Canary: "b", Since: t0}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 10, After: 10 * time.Second},
	}, {
		name:  "an action longer than MaxAction acts on nothing (the status could not keep it to compare)",
		plan:  plain,
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "abort b " + strings.Repeat("x", MaxAction)},
		now:   t0.Add(10 * time.Second),
		want:  Decision{State: State{Stable: "a", Canary: "b", Since: t0}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 10, After: 50 * time.Second},
	}, {
		name:  "aborted by a person, at a gate: rolled back at once",
		plan:  gated(0, ""),
		state: State{Stable: "a", Canary: "b", Since: t0, GateSince: t0.Add(time.Minute)},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "abort b"},
		now:   t0.Add(time.Hour),
		want: Decision{State: State{Stable: "a", Failed: "b", Since: t0.Add(time.Hour), Reason: webappv2.ReasonAborted,
			Message: "aborted by a person (webapp.example.com/action: abort b)", ActedOn: "abort b"}, Phase: PhaseRolledBack, ReplicaWeight: 10, After: Retire},
	}, {
		name:  "the aborted version retried by a person: its canary starts again",
		plan:  plain,
		state: State{Stable: "a", Failed: "b", Reason: webappv2.ReasonAborted, ActedOn: "abort b"},
		obs:   Observation{Revision: "b", Deployed: "a", Action: "retry b"},
		want:  Decision{State: State{Stable: "a", Canary: "b", ActedOn: "retry b"}, Phase: PhaseCanary, ReplicaWeight: 10},
	}, {
		name:  "a retry acted on, the canary failed again: the same value does not retry it again (no loop)",
		plan:  plain,
		state: State{Stable: "a", Failed: "b", Reason: webappv2.ReasonCheckFailed, ActedOn: "retry b"},
		obs:   Observation{Revision: "b", Deployed: "a", Action: "retry b"},
		want:  Decision{State: State{Stable: "a", Failed: "b", Reason: webappv2.ReasonCheckFailed, ActedOn: "retry b"}, Phase: PhaseRolledBack},
	}, {
		name:  "a new value retries it again",
		plan:  plain,
		state: State{Stable: "a", Failed: "b", Reason: webappv2.ReasonCheckFailed, ActedOn: "retry b"},
		obs:   Observation{Revision: "b", Deployed: "a", Action: "retry b at 2026-12-07T05:00:00Z"},
		want:  Decision{State: State{Stable: "a", Canary: "b", ActedOn: "retry b at 2026-12-07T05:00:00Z"}, Phase: PhaseCanary, ReplicaWeight: 10},
	}, {
		name:  "an abort acted on, the version retried: the abort does not act again",
		plan:  plain,
		state: State{Stable: "a", Canary: "b", Since: t0, ActedOn: "abort b"},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "abort b"},
		now:   t0.Add(10 * time.Second),
		want:  Decision{State: State{Stable: "a", Canary: "b", Since: t0, ActedOn: "abort b"}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 10, After: 50 * time.Second},
	}, {
		name:  "a retry of another version acts on nothing: the failed one stays rolled back",
		plan:  plain,
		state: State{Stable: "a", Failed: "b", Reason: webappv2.ReasonAborted},
		obs:   Observation{Revision: "b", Deployed: "a", Action: "retry x"},
		want:  Decision{State: State{Stable: "a", Failed: "b", Reason: webappv2.ReasonAborted}, Phase: PhaseRolledBack},
	}, {
		name:  "an action that is none (a typo) acts on nothing",
		plan:  plain,
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "promte b/0"},
		now:   t0.Add(10 * time.Second),
		want:  Decision{State: State{Stable: "a", Canary: "b", Since: t0}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 10, After: 50 * time.Second},
	}, {
		name:  "-Inf fails: below every max, yet no measurement",
		plan:  Plan{Steps: steps, Checks: []Check{{Name: "errors", Max: 0.05, Interval: time.Second}}},
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Checks: []CheckResult{{Value: math.Inf(-1)}}, ChecksAt: t0},
		now:   t0,
		want: Decision{State: State{Stable: "a", Failed: "b", Since: t0, Reason: webappv2.ReasonCheckFailed,
			Message: "check errors: -Inf is not a finite number (failures 1, allowed 0)", Evaluations: evaluated("-Inf", false, "-Inf is not a finite number", t0)}, Phase: PhaseRolledBack, ReplicaWeight: 10, After: Retire},
	}, {
		name:  "+Inf fails",
		plan:  Plan{Steps: steps, Checks: []Check{{Name: "errors", Max: 0.05, Interval: time.Second}}},
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Checks: []CheckResult{{Value: math.Inf(1)}}, ChecksAt: t0},
		now:   t0,
		want: Decision{State: State{Stable: "a", Failed: "b", Since: t0, Reason: webappv2.ReasonCheckFailed,
			Message: "check errors: +Inf is not a finite number (failures 1, allowed 0)", Evaluations: evaluated("+Inf", false, "+Inf is not a finite number", t0)}, Phase: PhaseRolledBack, ReplicaWeight: 10, After: Retire},
	}, {
		name:  "the canary's pods crash-loop: rolled back at once, whatever the step",
		plan:  checked,
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", TroubleReason: webappv2.ReasonCrashLoopBackOff, TroubleMessage: "1/1 pods: back-off restarting app"},
		now:   t0,
		want: Decision{State: State{Stable: "a", Failed: "b", Step: 1, Since: t0, Reason: webappv2.ReasonCrashLoopBackOff,
			Message: "1/1 pods: back-off restarting app"}, Phase: PhaseRolledBack, ReplicaWeight: 50, After: Retire},
	}, {
		name:  "rolled back: the canary's pods go once the traffic has left them; the checks' last values stay, as evidence",
		plan:  plain,
		state: State{Stable: "a", Failed: "b", Step: 1, Since: t0, Reason: webappv2.ReasonCrashLoopBackOff, Evaluations: evaluated("0.3", false, "", t0)},
		obs:   Observation{Revision: "b", Deployed: "a"},
		now:   t0.Add(Retire),
		want:  Decision{State: State{Stable: "a", Failed: "b", Reason: webappv2.ReasonCrashLoopBackOff, Evaluations: evaluated("0.3", false, "", t0)}, Phase: PhaseRolledBack},
	}, {
		name:  "a new version while one is promoted: the promoted one is stable, the new one its canary",
		plan:  plain,
		state: State{Stable: "a", Canary: "b", Step: 2},
		obs:   Observation{Revision: "c", Deployed: "b"},
		want:  Decision{State: State{Stable: "b", Canary: "c", Retiring: "b"}, Phase: PhaseCanary, ReplicaWeight: 10, After: Retire},
	}, {
		name:  "the rolled-back version applied again: it stays rolled back (no loop)",
		plan:  plain,
		state: State{Stable: "a", Failed: "b", Reason: webappv2.ReasonCrashLoopBackOff},
		obs:   Observation{Revision: "b", Deployed: "a"},
		want:  Decision{State: State{Stable: "a", Failed: "b", Reason: webappv2.ReasonCrashLoopBackOff}, Phase: PhaseRolledBack},
	}, {
		name:  "a new version after a rollback: a new canary (no values yet), the failed one still known",
		plan:  plain,
		state: State{Stable: "a", Failed: "b", Reason: webappv2.ReasonCrashLoopBackOff, Message: "m", Evaluations: evaluated("0.3", false, "", t0)},
		obs:   Observation{Revision: "c", Deployed: "a"},
		want:  Decision{State: State{Stable: "a", Canary: "c", Failed: "b"}, Phase: PhaseCanary, ReplicaWeight: 10},
	}, {
		name:  "the spec set back to stable mid-canary: the canary is dropped, stable serves",
		plan:  plain,
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t0, Failures: []int32{1}, Evaluations: evaluated("0.3", false, "", t0)},
		obs:   Observation{Revision: "a", Deployed: "a"},
		now:   t0.Add(time.Minute),
		want:  Decision{State: State{Stable: "a", Retiring: "b", RetiringSince: t0.Add(time.Minute)}, Phase: PhaseStable, After: Retire},
	}, {
		name:  "the spec set back before the canary's first step was ready: the route sent it nothing, it goes at once",
		plan:  plain,
		state: State{Stable: "a", Canary: "b"},
		obs:   Observation{Revision: "a", Deployed: "a", CanaryReady: true},
		want:  Decision{State: State{Stable: "a"}, Phase: PhaseStable},
	}, {
		name:  "a check failed without a route: rolled back, the canary's pods deleted at once (kept, they would serve their share behind the one Service)",
		plan:  Plan{Steps: plain.Steps, Checks: checked.Checks, Shared: true},
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t0, Failures: []int32{1}, Evaluations: evaluated("0.3", false, "", t0)},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Checks: bad, ChecksAt: t0.Add(10 * time.Second)},
		now:   t0.Add(11 * time.Second),
		want: Decision{State: State{Stable: "a", Failed: "b", Step: 1, Reason: webappv2.ReasonCheckFailed, Message: "check errors: 0.3 > 0.05 (failures 2, allowed 1)",
			Evaluations: evaluated("0.3", false, "", t0.Add(10*time.Second))}, Phase: PhaseRolledBack},
	}, {
		name:  "the spec set back mid-canary without a route: its pods leave the one Service as any pod going does, nothing retires",
		plan:  Plan{Steps: plain.Steps, Shared: true},
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t0},
		obs:   Observation{Revision: "a", Deployed: "a"},
		want:  Decision{State: State{Stable: "a"}, Phase: PhaseStable},
	}, {
		name:  "a step passed whose next needs no other count: the next one's pause starts now, its traffic after the warm-up",
		plan:  plain,
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, NextStepReady: true},
		now:   t0.Add(2 * time.Minute),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 1, Since: t0.Add(2 * time.Minute)}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10}, ReplicaWeight: 50, After: Warmup},
	}, {
		name:  "the version changed mid-canary: the new one starts from the first step",
		plan:  plain,
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t0},
		obs:   Observation{Revision: "c", Deployed: "a", CanaryReady: true},
		now:   t0.Add(time.Minute),
		want:  Decision{State: State{Stable: "a", Canary: "c", Retiring: "b", RetiringSince: t0.Add(time.Minute)}, Phase: PhaseCanary, ReplicaWeight: 10, After: Retire},
	}, {
		name:  "the version the spec left retires: the new one's canary waits, with no traffic, until its pods are gone",
		plan:  plain,
		state: State{Stable: "a", Canary: "c", Retiring: "b", RetiringSince: t0},
		obs:   Observation{Revision: "c", Deployed: "a"},
		now:   t0.Add(4 * time.Second),
		want:  Decision{State: State{Stable: "a", Canary: "c", Retiring: "b", RetiringSince: t0}, Phase: PhaseCanary, ReplicaWeight: 10, After: 6 * time.Second},
	}, {
		name:  "retired: the version the spec left is forgotten, its Deployment replaced by the new one's",
		plan:  plain,
		state: State{Stable: "a", Canary: "c", Retiring: "b", RetiringSince: t0},
		obs:   Observation{Revision: "c", Deployed: "a"},
		now:   t0.Add(Retire),
		want:  Decision{State: State{Stable: "a", Canary: "c"}, Phase: PhaseCanary, ReplicaWeight: 10},
	}, {
		name:  "retiring since a time ahead of our clock: never held longer than Retire",
		plan:  plain,
		state: State{Stable: "a", Retiring: "b", RetiringSince: t0.Add(time.Hour)},
		obs:   Observation{Revision: "a", Deployed: "a"},
		now:   t0,
		want:  Decision{State: State{Stable: "a"}, Phase: PhaseStable},
	}, {
		name:  "retiring since a moment ahead of our clock (a leader's before ours): held Retire at most from now",
		plan:  plain,
		state: State{Stable: "a", Retiring: "b", RetiringSince: t0.Add(3 * time.Second)},
		obs:   Observation{Revision: "a", Deployed: "a"},
		now:   t0,
		want:  Decision{State: State{Stable: "a", Retiring: "b", RetiringSince: t0.Add(3 * time.Second)}, Phase: PhaseStable, After: Retire},
	}, {
		name:  "the new version's canary aborted while the one before it retires: nothing of its own to retire, the other's pods retire on",
		plan:  plain,
		state: State{Stable: "a", Canary: "c", Retiring: "b", RetiringSince: t0},
		obs:   Observation{Revision: "c", Deployed: "a", Action: "abort c"},
		now:   t0.Add(2 * time.Second),
		want: Decision{State: State{Stable: "a", Failed: "c", ActedOn: "abort c", Reason: webappv2.ReasonAborted, Message: "aborted by a person (" + webappv2.AnnotationAction + ": abort c)",
			Retiring: "b", RetiringSince: t0}, Phase: PhaseRolledBack, After: 8 * time.Second},
	}, {
		name:  "a newer version while a rolled-back canary and the one before it retire: the retiring pods stay the ones in the Deployment",
		plan:  plain,
		state: State{Stable: "a", Failed: "c", Since: t0.Add(time.Second), Step: 1, Retiring: "b", RetiringSince: t0},
		obs:   Observation{Revision: "d", Deployed: "a"},
		now:   t0.Add(2 * time.Second),
		want:  Decision{State: State{Stable: "a", Canary: "d", Failed: "c", Retiring: "b", RetiringSince: t0}, Phase: PhaseCanary, ReplicaWeight: 10, After: 8 * time.Second},
	}, {
		name:  "the spec leaves a canary while no stable Deployment runs (deleted, about to come back): the new version is a canary still",
		plan:  plain,
		state: State{Stable: "a", Canary: "b", Step: 1},
		obs:   Observation{Revision: "c"},
		now:   t0,
		want:  Decision{State: State{Stable: "a", Canary: "c", Retiring: "b", RetiringSince: t0}, Phase: PhaseCanary, ReplicaWeight: 10, After: Retire},
	}, {
		name:  "the spec back at the retiring version: its pods are its new canary's, not retiring",
		plan:  plain,
		state: State{Stable: "a", Retiring: "b", RetiringSince: t0},
		obs:   Observation{Revision: "b", Deployed: "a"},
		now:   t0.Add(time.Second),
		want:  Decision{State: State{Stable: "a", Canary: "b"}, Phase: PhaseCanary, ReplicaWeight: 10},
	}, {
		name:  "a new version while a rolled-back canary's pods retire: they finish retiring before the new canary's come",
		plan:  plain,
		state: State{Stable: "a", Failed: "b", Step: 1, Since: t0, Reason: webappv2.ReasonCheckFailed},
		obs:   Observation{Revision: "c", Deployed: "a"},
		now:   t0.Add(3 * time.Second),
		want:  Decision{State: State{Stable: "a", Canary: "c", Failed: "b", Retiring: "b", RetiringSince: t0}, Phase: PhaseCanary, ReplicaWeight: 10, After: 7 * time.Second},
	}, {
		name:  "the last pause over: promoting, the canary keeping its weight while stable rolls",
		plan:  plain,
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t0.Add(2 * time.Minute),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 2}, Phase: PhasePromoting, Traffic: Traffic{Weight: 50}, ReplicaWeight: 50},
	}, {
		name:  "promoting: a crash seen now is not the canary's to roll back",
		plan:  plain,
		state: State{Stable: "a", Canary: "b", Step: 2},
		obs:   Observation{Revision: "b", Deployed: "b", TroubleReason: webappv2.ReasonCrashLoopBackOff},
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 2}, Phase: PhasePromoting, Traffic: Traffic{Weight: 50}, ReplicaWeight: 50},
	}, {
		name:  "stable rolled out: the traffic leaves the canary, whose pods stay a moment longer",
		plan:  plain,
		state: State{Stable: "a", Canary: "b", Step: 2, Failed: "x"},
		obs:   Observation{Revision: "b", Deployed: "b", StableRolledOut: true},
		now:   t0,
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 2, Failed: "x", Since: t0}, Phase: PhasePromoting, ReplicaWeight: 50, After: Retire},
	}, {
		name:  "promoted: the new version is stable, the canary and the failed record gone",
		plan:  plain,
		state: State{Stable: "a", Canary: "b", Step: 2, Failed: "x", Since: t0, Evaluations: evaluated("0.3", false, "", t0)},
		obs:   Observation{Revision: "b", Deployed: "b", StableRolledOut: true},
		now:   t0.Add(Retire),
		want:  Decision{State: State{Stable: "b"}, Phase: PhaseStable},
	}, {
		name:  "no steps: the new version is promoted at once",
		plan:  Plan{},
		state: State{Stable: "a"},
		obs:   Observation{Revision: "b", Deployed: "a"},
		want:  Decision{State: State{Stable: "a", Canary: "b"}, Phase: PhasePromoting},
	}}
	runNext(t, tests)
}

// nextCase is a row of the step machine's tables: from state, seeing obs at now under plan, Next decides want.
type nextCase struct {
	name  string
	plan  Plan
	state State
	obs   Observation
	now   time.Time
	want  Decision
}

// runNext checks each row of tests as a subtest.
func runNext(t *testing.T, tests []nextCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Next(tt.plan, tt.state, tt.obs, tt.now)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Next:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestCanaryTrafficByRequest: a step's matches and mirror reach the route when its weight does (once its pods are
// ready and warmed up), stay while the next step's pods come up and through the promotion, and are gone after it
// and after a rollback. A step of matches or mirror alone still runs canary pods.
func TestCanaryTrafficByRequest(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	ab := []webappv2.CanaryMatch{{Headers: []webappv2.CanaryHeaderMatch{{Name: "X-Canary", Value: "always"}}}}
	plan := Plan{Steps: []Step{{Matches: ab, Pause: time.Minute}, {Weight: 10, Mirror: 50, Pause: time.Minute}}}
	tests := []nextCase{{
		name:  "matches alone, pods not ready: no traffic yet, one pod's worth asked for",
		state: State{Stable: "a", Canary: "b"},
		obs:   Observation{Revision: "b", Deployed: "a"},
		want:  Decision{State: State{Stable: "a", Canary: "b"}, Phase: PhaseCanary, ReplicaWeight: 1},
	}, {
		name:  "matches alone, ready and warming up: still no traffic",
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t0.Add(time.Second),
		want:  Decision{State: State{Stable: "a", Canary: "b", Since: t0}, Phase: PhaseCanary, ReplicaWeight: 1, After: Warmup - time.Second},
	}, {
		name:  "matches alone, warmed up: the matching requests, and no share by weight",
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t0.Add(Warmup),
		want:  Decision{State: State{Stable: "a", Canary: "b", Since: t0}, Phase: PhaseCanary, Traffic: Traffic{Matches: ab}, ReplicaWeight: 1, After: time.Minute - Warmup},
	}, {
		name:  "the next step's pods not ready: the matches stay, the pods are counted for its weight and mirror",
		state: State{Stable: "a", Canary: "b", Step: 1},
		obs:   Observation{Revision: "b", Deployed: "a"},
		now:   t0.Add(2 * time.Minute),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 1}, Phase: PhaseCanary, Traffic: Traffic{Matches: ab}, ReplicaWeight: 60},
	}, {
		name:  "the next step warmed up: its weight and mirror, the matches gone",
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t0.Add(Warmup),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 1, Since: t0}, Phase: PhaseCanary, Traffic: Traffic{Weight: 10, Mirror: 50}, ReplicaWeight: 60, After: time.Minute - Warmup},
	}, {
		name:  "promoting: the last step's traffic until the stable Deployment has rolled",
		state: State{Stable: "a", Canary: "b", Step: 2},
		obs:   Observation{Revision: "b", Deployed: "b"},
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 2}, Phase: PhasePromoting, Traffic: Traffic{Weight: 10, Mirror: 50}, ReplicaWeight: 60},
	}, {
		name:  "promoting when the Gateway's class no longer lists the mirror: not rolled back, the mirror left out",
		state: State{Stable: "a", Canary: "b", Step: 2},
		obs:   Observation{Revision: "b", Deployed: "b", GatewayLacks: "GatewayClass x does not list HTTPRouteRequestMirror"},
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 2}, Phase: PhasePromoting, Traffic: Traffic{Weight: 10}, ReplicaWeight: 60},
	}, {
		name:  "aborted while promoting, the stable version kept: rolled back, the traffic the stable Service's alone",
		state: State{Stable: "a", Canary: "b", Step: 2},
		obs:   Observation{Revision: "b", Deployed: "b", StableKept: true, Action: Abort("b")},
		now:   t0,
		want: Decision{State: State{Stable: "a", Failed: "b", Step: 2, Since: t0, ActedOn: Abort("b"), Reason: webappv2.ReasonAborted,
			Message: "aborted by a person while being promoted (" + webappv2.AnnotationAction + ": abort b)"}, Phase: PhaseRolledBack, ReplicaWeight: 60, After: Retire},
	}, {
		name:  "aborted while promoting, the stable version not kept (a record of an older operator): acts on nothing",
		state: State{Stable: "a", Canary: "b", Step: 2},
		obs:   Observation{Revision: "b", Deployed: "b", Action: Abort("b")},
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 2}, Phase: PhasePromoting, Traffic: Traffic{Weight: 10, Mirror: 50}, ReplicaWeight: 60},
	}, {
		name:  "promoted, the pods retiring: no traffic",
		state: State{Stable: "a", Canary: "b", Step: 2, Since: t0},
		obs:   Observation{Revision: "b", Deployed: "b", StableRolledOut: true},
		now:   t0.Add(time.Second),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 2, Since: t0}, Phase: PhasePromoting, ReplicaWeight: 60, After: Retire - time.Second},
	}, {
		name:  "the Gateway's class lacks what the plan's mirror needs: rolled back before the route asks for it",
		state: State{Stable: "a", Canary: "b"},
		obs:   Observation{Revision: "b", Deployed: "a", GatewayLacks: "GatewayClass x does not list HTTPRouteRequestMirror"},
		now:   t0,
		want: Decision{State: State{Stable: "a", Failed: "b", Since: t0, Reason: webappv2.ReasonGatewayUnsupported,
			Message: "GatewayClass x does not list HTTPRouteRequestMirror"}, Phase: PhaseRolledBack, ReplicaWeight: 1, After: Retire},
	}, {
		name:  "aborted at the step of matches: no traffic, the pods retire",
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: Abort("b")},
		now:   t0.Add(time.Minute),
		want: Decision{State: State{Stable: "a", Failed: "b", Since: t0.Add(time.Minute), ActedOn: Abort("b"), Reason: webappv2.ReasonAborted,
			Message: "aborted by a person (" + webappv2.AnnotationAction + ": abort b)"}, Phase: PhaseRolledBack, ReplicaWeight: 1, After: Retire},
	}}
	for i := range tests {
		// One plan for every row.
		tests[i].plan = plan
	}
	runNext(t, tests)
}

// TestCanaryRestartResumes: the state alone (as the status keeps it) carries a canary through its steps, each
// pause counted from the state's own start, so a reconcile after a restart continues where the last one left.
func TestCanaryRestartResumes(t *testing.T) {
	plan := Plan{Steps: []Step{{Weight: 20, Pause: time.Minute}, {Weight: 60, Pause: time.Minute}}}
	now := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	s := State{Stable: "a"}
	var weights []int32
	for i := 0; i < 12; i++ {
		obs := Observation{Revision: "b", Deployed: "a", CanaryReady: i > 0}
		if s.Step >= len(plan.Steps) {
			obs.Deployed, obs.StableRolledOut = "b", true
		}
		d := Next(plan, s, obs, now)
		// (Within a step: a new step's readiness is another observation.)
		if again := Next(plan, d.State, obs, now); again.Weight != d.Weight && again.Phase == d.Phase && d.State.Step == s.Step {
			t.Fatalf("look %d: deciding again from the new state at the same moment moved the traffic: %+v then %+v", i, d, again)
		}
		s = d.State
		weights = append(weights, d.Weight)
		if d.Phase == PhaseStable && s.Stable == "b" {
			break
		}
		now = now.Add(30 * time.Second)
	}
	if s.Stable != "b" || s.Canary != "" {
		t.Fatalf("not promoted: %+v, weights %v", s, weights)
	}
	// (Each look 30 s after the last: a step's first ready look is within its warm-up, at the weight before.)
	want := []int32{0, 0, 20, 20, 20, 60, 60, 0, 0}
	if !reflect.DeepEqual(weights, want) {
		t.Errorf("weights %v, want %v", weights, want)
	}
}

// TestNoStateHoldsAReleaseForEver: from every state a walk of random looks and a person's random actions reaches,
// the release finishes or goes back on its own (a pause, a check, a gate with a timeout), or it waits at a gate
// without one for a person, from which a promotion all the way finishes it and an abort takes it back at once.
func TestNoStateHoldsAReleaseForEver(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	// How many walks kept a version warm, and took the way back to it: the draw must reach both.
	var kept, wayBacks int
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var plan Plan
		for i := range 1 + rng.IntN(3) {
			st := Step{Weight: int32(10 * (i + 1)), Pause: time.Duration(rng.IntN(3)) * time.Minute, Gate: rng.IntN(2) == 0}
			if rng.IntN(3) == 0 {
				// A step of matches or a mirror alone (weight 0) passes the same way.
				st.Weight, st.Mirror = 0, int32(rng.IntN(101))
				st.Matches = []webappv2.CanaryMatch{{Cookie: &webappv2.CanaryCookieMatch{Name: "c", Value: "1"}}}
			}
			if st.Gate && rng.IntN(2) == 0 {
				st.GateTimeout, st.OnTimeout = time.Duration(1+rng.IntN(10))*time.Minute, webappv2.GateTimeout([]string{"", "RollBack", "Promote"}[rng.IntN(3)])
			}
			plan.Steps = append(plan.Steps, st)
		}
		if rng.IntN(4) == 0 {
			// A blue/green: its preview (gated or not; at full size, or now and then a share of it) and its switch at
			// full size.
			preview := plan.Steps[0]
			preview.Weight, preview.Matches, preview.Mirror, preview.Size = 0, nil, 0, []int32{100, 100, 1 + int32(rng.IntN(99))}[rng.IntN(3)]
			plan = Plan{BlueGreen: true, Steps: []Step{preview, {Weight: 100, Pause: time.Duration(rng.IntN(3)) * time.Minute, Size: 100}}}
		}
		// Without a route, now and then: steps share the one Service (nothing retires then), a blue/green switches it.
		plan.Shared = !plan.BlueGreen && rng.IntN(4) == 0
		plan.Switched = plan.BlueGreen && rng.IntN(2) == 0
		if rng.IntN(2) == 0 {
			// A rollback window of minutes, the version before kept warm through it now and then.
			plan.RollbackWindow, plan.KeepWarm = time.Duration(1+rng.IntN(10))*time.Minute, rng.IntN(2) == 0
		}
		// The spec's version: b, and now and then another (set back to a, or c), which leaves a canary of b.
		rev := "b"
		actions := []string{"", "", "", "promote %s/0", "promote %s/1", "promote %s/full", "abort %s", "retry %s", "retry %s again", "abort %s again"}
		s, now := State{Stable: "a"}, t0
		// walking: the route's or the Service's write is refused now and then, and our last one came a moment ago.
		walking := true
		look := func(action string) Decision {
			obs := Observation{Revision: rev, Deployed: s.Stable, CanaryReady: true, Action: action, WarmReady: rng.IntN(2) == 0}
			if walking && rng.IntN(4) == 0 {
				obs.TrafficOnCanary, obs.TrafficLeft = rng.IntN(2) == 0, now.Add(time.Duration(rng.IntN(20)-15)*time.Second)
			}
			if rng.IntN(4) > 0 {
				// The record holds the version before, as the promotion kept it (or, now and then, it does not).
				obs.Recorded = s.Previous
			}
			if s.Step >= len(plan.Steps) && s.Canary != "" {
				obs.Deployed, obs.StableRolledOut = s.Canary, true
			}
			d := Next(plan, s, obs, now)
			if d.Warm != "" {
				kept++
			}
			if d.State.WayBack() && !s.WayBack() {
				wayBacks++
			}
			s = d.State
			now = now.Add(time.Duration(1+rng.IntN(30)) * time.Second)
			return d
		}
		var walk []string
		for range 30 {
			if rng.IntN(6) == 0 {
				rev = []string{"a", "b", "c"}[rng.IntN(3)]
				walk = append(walk, "spec "+rev)
			}
			a := actions[rng.IntN(len(actions))]
			if strings.Contains(a, "%s") {
				a = fmt.Sprintf(a, rev)
			}
			d := look(a)
			walk = append(walk, fmt.Sprintf("%q→%s/%d", a, d.Phase, s.Step))
		}
		// Then no one acts, for a day of looks, and every write succeeds.
		walking = false
		var d Decision
		for range 2000 {
			d = look(s.ActedOn)
		}
		at := func() string {
			return fmt.Sprintf("seed %d, plan %+v, walk %v: %s at step %d, state %+v", seed, plan, walk, d.Phase, s.Step, s)
		}
		switch {
		case s.Retiring != "" || d.State.Retiring != "":
			t.Fatalf("a canary's pods retire for ever: %s", at())
		case d.Warm != "":
			t.Fatalf("the version before is kept warm for ever: %s", at())
		case d.Phase == PhaseStable || d.Phase == PhaseRolledBack:
		case d.Phase == PhaseCanary && !s.GateSince.IsZero() && plan.Steps[s.Step].Gate && plan.Steps[s.Step].GateTimeout == 0:
			// Waiting for a person: an abort takes it back at once; a promotion all the way finishes it.
			held := s
			if d := look("abort " + rev + " now"); d.Phase != PhaseRolledBack {
				t.Fatalf("an abort at a gate did not roll back: %s", at())
			}
			s = held
			for range 50 {
				d = look("promote " + rev + "/full now")
			}
			if d.Phase != PhaseStable || s.Stable != rev {
				t.Fatalf("a promotion all the way from a gate did not finish: %s", at())
			}
		default:
			t.Fatalf("held without a person to wait for: %s", at())
		}
	}
	if kept == 0 || wayBacks == 0 {
		t.Errorf("the walks kept a version warm %d times and took the way back to it %d times: the draw must reach both", kept, wayBacks)
	}
	t.Logf("kept warm at %d looks, %d ways back", kept, wayBacks)
}

func TestGatewayFeatures(t *testing.T) {
	for _, tc := range []struct {
		steps []Step
		want  []string
	}{
		{[]Step{{Weight: 10}, {Weight: 50, Matches: []webappv2.CanaryMatch{{}}}}, nil},
		{[]Step{{Mirror: 100}, {Weight: 50}}, []string{FeatureMirror}},
		{[]Step{{Mirror: 100}, {Weight: 50, Mirror: 20}}, []string{FeatureMirror, FeaturePercentageMirror}},
	} {
		if got := (Plan{Steps: tc.steps}).GatewayFeatures(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.steps, got, tc.want)
		}
	}
}

func TestTrafficWords(t *testing.T) {
	ab := webappv2.CanaryMatch{Headers: []webappv2.CanaryHeaderMatch{{Name: "X-Canary", Value: "always"}, {Name: "User-Agent", Value: ".*Firefox.*", Type: webappv2.HeaderRegularExpression}}}
	cookie := webappv2.CanaryMatch{Cookie: &webappv2.CanaryCookieMatch{Name: "canary", Value: "yes"}}
	for _, tc := range []struct {
		traffic Traffic
		want    string
	}{
		{Traffic{}, "0% of the traffic"},
		{Traffic{Weight: 10}, "10% of the traffic"},
		{Traffic{Matches: []webappv2.CanaryMatch{ab, cookie}}, "the requests with header X-Canary: always and header User-Agent matching .*Firefox.* or with cookie canary=yes"},
		{Traffic{Mirror: 30}, "a copy of 30% of the requests"},
		{Traffic{Weight: 5, Matches: []webappv2.CanaryMatch{cookie}, Mirror: 100}, "5% of the traffic, the requests with cookie canary=yes, and a copy of 100% of the requests"},
	} {
		if got := tc.traffic.Words(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.traffic, got, tc.want)
		}
		if tc.traffic.None() != (tc.want == "0% of the traffic") {
			t.Errorf("%+v: None() = %v", tc.traffic, tc.traffic.None())
		}
	}
}

// TestRollbackWithinTheWindow: a promotion keeps the version it replaced known for the plan's window; the spec set
// back to it meanwhile makes it stable at once, with no canary; after the window, without one, or while another
// canary runs, it is a new version like any other.
func TestRollbackWithinTheWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	steps := []Step{{Weight: 10, Pause: time.Minute}}
	windowed := Plan{Steps: steps, RollbackWindow: time.Hour}
	back := "the spec was set back to revision a, the version before revision b, within the rollback window: rolled back to it at once, without a canary"
	tests := []nextCase{{
		name:  "a promotion completes: the version it replaced is kept known for the window",
		plan:  windowed,
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t0},
		obs:   Observation{Revision: "b", Deployed: "b", StableRolledOut: true},
		now:   t0.Add(Retire),
		want:  Decision{State: State{Stable: "b", Previous: "a", PreviousUntil: t0.Add(Retire + time.Hour)}, Phase: PhaseStable},
	}, {
		name:  "without a window, nothing is kept",
		plan:  Plan{Steps: steps},
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t0, Previous: "z", PreviousUntil: t0},
		obs:   Observation{Revision: "b", Deployed: "b", StableRolledOut: true},
		now:   t0.Add(Retire),
		want:  Decision{State: State{Stable: "b"}, Phase: PhaseStable},
	}, {
		name:  "the spec set back within the window: stable at once, no canary",
		plan:  windowed,
		state: State{Stable: "b", Previous: "a", PreviousUntil: t0.Add(time.Hour)},
		obs:   Observation{Revision: "a", Deployed: "b"},
		now:   t0.Add(time.Minute),
		want:  Decision{State: State{Stable: "a", Reason: webappv2.ReasonRolledBackToPrevious, Message: back}, Phase: PhaseStable},
	}, {
		name:  "after the window: a canary like any new version",
		plan:  windowed,
		state: State{Stable: "b", Previous: "a", PreviousUntil: t0.Add(time.Hour)},
		obs:   Observation{Revision: "a", Deployed: "b"},
		now:   t0.Add(time.Hour),
		want:  Decision{State: State{Stable: "b", Canary: "a", Previous: "a", PreviousUntil: t0.Add(time.Hour)}, Phase: PhaseCanary, ReplicaWeight: 10},
	}, {
		name:  "the window taken out of the plan: a canary",
		plan:  Plan{Steps: steps},
		state: State{Stable: "b", Previous: "a", PreviousUntil: t0.Add(time.Hour)},
		obs:   Observation{Revision: "a", Deployed: "b"},
		now:   t0.Add(time.Minute),
		want:  Decision{State: State{Stable: "b", Canary: "a", Previous: "a", PreviousUntil: t0.Add(time.Hour)}, Phase: PhaseCanary, ReplicaWeight: 10},
	}, {
		name:  "a promotion interrupted by a newer version: the promoted one is stable, no window for the one it replaced",
		plan:  windowed,
		state: State{Stable: "b", Canary: "c", Step: 1, Previous: "a", PreviousUntil: t0.Add(time.Hour)},
		obs:   Observation{Revision: "d", Deployed: "c"},
		now:   t0.Add(time.Minute),
		want:  Decision{State: State{Stable: "c", Canary: "d", Retiring: "c", RetiringSince: t0.Add(time.Minute)}, Phase: PhaseCanary, ReplicaWeight: 10, After: Retire},
	}, {
		name:  "while another version's canary runs: the previous one is tried by a canary too",
		plan:  windowed,
		state: State{Stable: "b", Canary: "c", Since: t0, Previous: "a", PreviousUntil: t0.Add(time.Hour)},
		obs:   Observation{Revision: "a", Deployed: "b"},
		now:   t0.Add(time.Minute),
		want: Decision{State: State{Stable: "b", Canary: "a", Previous: "a", PreviousUntil: t0.Add(time.Hour), Retiring: "c", RetiringSince: t0.Add(time.Minute)},
			Phase: PhaseCanary, ReplicaWeight: 10, After: Retire},
	}}
	runNext(t, tests)
}

// TestKeptWarm: with KeepWarm, the version a promotion replaced runs at full size with none of the traffic through
// the rollback window (from the record of its template, never past the window); the spec set back to it once its
// pods are ready sends them all the traffic at once, the stable Deployment rolling back behind the route, and the
// traffic back on the stable Service after; without its pods ready (or without a route) the way back is the
// window's alone.
func TestKeptWarm(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	steps := []Step{{Weight: 10, Pause: time.Minute}}
	warm := Plan{Steps: steps, RollbackWindow: time.Hour, KeepWarm: true}
	shared := warm
	shared.Shared = true
	kept := State{Stable: "b", Previous: "a", PreviousUntil: t0.Add(time.Hour)}
	cold := "the spec was set back to revision a, the version before revision b, within the rollback window: rolled back to it at once, without a canary"
	hot := "the spec was set back to revision a, the version before revision b, within the rollback window: all the traffic went to its pods kept warm at once, and the Deployment rolls back to it"
	backing := State{Stable: "b", Canary: "a", Step: 1, Reason: webappv2.ReasonRolledBackToPrevious, Message: hot}
	tests := []nextCase{{
		name:  "a promotion completes, the record holding the version it replaced: kept warm for the window",
		plan:  warm,
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t0},
		obs:   Observation{Revision: "b", Deployed: "b", StableRolledOut: true, Recorded: "a"},
		now:   t0.Add(Retire),
		want:  Decision{State: State{Stable: "b", Previous: "a", PreviousUntil: t0.Add(Retire + time.Hour)}, Phase: PhaseStable, Warm: "a", ReplicaWeight: 100, After: time.Hour},
	}, {
		name:  "a promotion completes, the record not holding it: nothing to make its pods from",
		plan:  warm,
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t0},
		obs:   Observation{Revision: "b", Deployed: "b", StableRolledOut: true, Recorded: "b"},
		now:   t0.Add(Retire),
		want:  Decision{State: State{Stable: "b", Previous: "a", PreviousUntil: t0.Add(Retire + time.Hour)}, Phase: PhaseStable},
	}, {
		name:  "within the window: kept, looked at again when it ends",
		plan:  warm,
		state: kept,
		obs:   Observation{Revision: "b", Deployed: "b", Recorded: "a"},
		now:   t0.Add(40 * time.Minute),
		want:  Decision{State: kept, Phase: PhaseStable, Warm: "a", ReplicaWeight: 100, After: 20 * time.Minute},
	}, {
		name:  "the window over: its pods go",
		plan:  warm,
		state: kept,
		obs:   Observation{Revision: "b", Deployed: "b", Recorded: "a"},
		now:   t0.Add(time.Hour),
		want:  Decision{State: kept, Phase: PhaseStable},
	}, {
		name:  "a window shortened since (or a clock ahead): kept until the end the promotion set, as the way back is open",
		plan:  Plan{Steps: steps, RollbackWindow: time.Minute, KeepWarm: true},
		state: kept,
		obs:   Observation{Revision: "b", Deployed: "b", Recorded: "a"},
		now:   t0,
		want:  Decision{State: kept, Phase: PhaseStable, Warm: "a", ReplicaWeight: 100, After: time.Hour},
	}, {
		name:  "without a route: nothing kept (the one Service would send its pods their share)",
		plan:  shared,
		state: kept,
		obs:   Observation{Revision: "b", Deployed: "b", Recorded: "a"},
		now:   t0,
		want:  Decision{State: kept, Phase: PhaseStable},
	}, {
		name:  "a canary's pods retiring: the canary's Deployment is theirs until they go",
		plan:  warm,
		state: State{Stable: "b", Previous: "a", PreviousUntil: t0.Add(time.Hour), Retiring: "c", RetiringSince: t0},
		obs:   Observation{Revision: "b", Deployed: "b", Recorded: "a"},
		now:   t0.Add(time.Second),
		want:  Decision{State: State{Stable: "b", Previous: "a", PreviousUntil: t0.Add(time.Hour), Retiring: "c", RetiringSince: t0}, Phase: PhaseStable, After: Retire - time.Second},
	}, {
		name:  "a new version within the window: its canary takes the canary's Deployment",
		plan:  warm,
		state: kept,
		obs:   Observation{Revision: "c", Deployed: "b", Recorded: "a"},
		now:   t0,
		want:  Decision{State: State{Stable: "b", Canary: "c", Previous: "a", PreviousUntil: t0.Add(time.Hour)}, Phase: PhaseCanary, ReplicaWeight: 10},
	}, {
		name:  "the spec set back, its pods ready: all the traffic to them at once, the Deployment rolling back behind the route",
		plan:  warm,
		state: kept,
		obs:   Observation{Revision: "a", Deployed: "b", Recorded: "a", WarmReady: true},
		now:   t0.Add(time.Minute),
		want:  Decision{State: backing, Phase: PhasePromoting, ReplicaWeight: 100, Traffic: Traffic{Weight: 100}},
	}, {
		name:  "the spec set back under an HPA: the stable count held by its floor while the stable pods serve nothing",
		plan:  warm,
		state: kept,
		obs:   Observation{Revision: "a", Deployed: "b", Recorded: "a", WarmReady: true, StableReplicas: 6},
		now:   t0.Add(time.Minute),
		want: Decision{State: State{Stable: "b", Canary: "a", Step: 1, Reason: webappv2.ReasonRolledBackToPrevious, Message: hot, Held: 6},
			Phase: PhasePromoting, ReplicaWeight: 100, Traffic: Traffic{Weight: 100}},
	}, {
		name:  "an abort of the way back: nothing to go back to; the value is spent",
		plan:  warm,
		state: backing,
		obs:   Observation{Revision: "a", Deployed: "a", Recorded: "a", Action: "abort a at 1", StableKept: true},
		now:   t0.Add(2 * time.Minute),
		want: Decision{State: State{Stable: "b", Canary: "a", Step: 1, Reason: webappv2.ReasonRolledBackToPrevious, Message: hot, ActedOn: "abort a at 1"},
			Phase: PhasePromoting, ReplicaWeight: 100, Traffic: Traffic{Weight: 100}},
	}, {
		name:  "the spec set forward again on the way back: stable as the Deployment is, the kept pods retiring, no word of a rollback left",
		plan:  warm,
		state: backing,
		obs:   Observation{Revision: "b", Deployed: "a", Recorded: "a"},
		now:   t0.Add(2 * time.Minute),
		want:  Decision{State: State{Stable: "b", Retiring: "a", RetiringSince: t0.Add(2 * time.Minute)}, Phase: PhaseStable, After: Retire},
	}, {
		name:  "a third version on the way back: the version set back to is stable (the Deployment rolls to it), the new one's canary after the kept pods retire",
		plan:  warm,
		state: backing,
		obs:   Observation{Revision: "c", Deployed: "a", Recorded: "a"},
		now:   t0.Add(2 * time.Minute),
		want:  Decision{State: State{Stable: "a", Canary: "c", Retiring: "a", RetiringSince: t0.Add(2 * time.Minute)}, Phase: PhaseCanary, ReplicaWeight: 10, After: Retire},
	}, {
		name:  "the spec set back before its pods are ready: the window's way back alone",
		plan:  warm,
		state: kept,
		obs:   Observation{Revision: "a", Deployed: "b", Recorded: "a"},
		now:   t0.Add(time.Minute),
		want:  Decision{State: State{Stable: "a", Reason: webappv2.ReasonRolledBackToPrevious, Message: cold}, Phase: PhaseStable},
	}, {
		name:  "the way back, the Deployment rolling: all the traffic stays on the kept pods",
		plan:  warm,
		state: backing,
		obs:   Observation{Revision: "a", Deployed: "a", Recorded: "a"},
		now:   t0.Add(2 * time.Minute),
		want:  Decision{State: backing, Phase: PhasePromoting, ReplicaWeight: 100, Traffic: Traffic{Weight: 100}},
	}, {
		name:  "the way back, the Deployment rolled back: the traffic leaves the kept pods, which retire",
		plan:  warm,
		state: backing,
		obs:   Observation{Revision: "a", Deployed: "a", Recorded: "a", StableRolledOut: true},
		now:   t0.Add(3 * time.Minute),
		want:  Decision{State: State{Stable: "b", Canary: "a", Step: 1, Since: t0.Add(3 * time.Minute), Reason: webappv2.ReasonRolledBackToPrevious, Message: hot}, Phase: PhasePromoting, ReplicaWeight: 100, After: Retire},
	}, {
		name:  "the way back done: stable again, with no window (the version left is the one set back from)",
		plan:  warm,
		state: State{Stable: "b", Canary: "a", Step: 1, Since: t0, Reason: webappv2.ReasonRolledBackToPrevious, Message: hot},
		obs:   Observation{Revision: "a", Deployed: "a", Recorded: "a", StableRolledOut: true},
		now:   t0.Add(Retire),
		want:  Decision{State: State{Stable: "a", Reason: webappv2.ReasonRolledBackToPrevious, Message: hot}, Phase: PhaseStable},
	}}
	runNext(t, tests)
}

// TestChecksOfThePreviewAndOfTheKeep: a blue/green's check during Preview gates only the preview (Argo Rollouts'
// prePromotionAnalysis), one during Keep only the keep (its postPromotionAnalysis): a round's result for a check not
// of the step is neither counted nor recorded (the controller does not query it; here its zero result would fail),
// and the last evaluation of the preview's check stays in the record through the keep.
func TestChecksOfThePreviewAndOfTheKeep(t *testing.T) {
	t0 := time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC)
	// Both limits are below the zero result of a check not queried: counted, it would fail.
	smoke := Check{Name: "smoke", Max: -1, Interval: 10 * time.Second, Steps: []int{0}}
	errs := Check{Name: "errors", Max: -1, Interval: 10 * time.Second, Steps: []int{1}}
	plan := Plan{BlueGreen: true, Switched: true, Checks: []Check{smoke, errs},
		Steps: []Step{{Pause: time.Minute, Size: 100}, {Weight: 100, Pause: 2 * time.Minute, Size: 100}}}
	preview := State{Stable: "a", Canary: "b", Since: t0}

	// The preview: smoke passes (its value at its max... below it), errors' zero result is not counted.
	d := Next(plan, preview, Observation{Revision: "b", Deployed: "a", CanaryReady: true,
		Checks: []CheckResult{{Value: -2}, {}}, ChecksAt: t0.Add(time.Minute + time.Second)}, t0.Add(time.Minute+2*time.Second))
	if d.Phase != PhaseCanary || d.State.Step != 1 {
		t.Fatalf("the preview with its check passing: %s step %d (%s), want the switch", d.Phase, d.State.Step, d.State.Message)
	}
	if len(d.State.Evaluations) != 1 || d.State.Evaluations[0].Name != "smoke" || !d.State.Evaluations[0].Passed {
		t.Errorf("the preview's record %+v, want smoke's passing evaluation alone", d.State.Evaluations)
	}
	// Switched by the Service: its pause runs from now. (No round of the keep yet: it waits for one.)
	keep := d.State

	// The preview again, smoke failing: rolled back, naming it.
	if d := Next(plan, preview, Observation{Revision: "b", Deployed: "a", CanaryReady: true,
		Checks: []CheckResult{{Value: 5}, {}}, ChecksAt: t0.Add(10 * time.Second)}, t0.Add(11*time.Second)); d.Phase != PhaseRolledBack || !strings.Contains(d.State.Message, "check smoke") {
		t.Errorf("the preview with smoke failing: %s %q, want rolled back by smoke", d.Phase, d.State.Message)
	}

	// The keep: errors passes, smoke's zero result is not counted; smoke's preview evaluation stays in the record.
	at := keep.Since.Add(10 * time.Second)
	d = Next(plan, keep, Observation{Revision: "b", Deployed: "a", CanaryReady: true, Checks: []CheckResult{{}, {Value: -3}}, ChecksAt: at}, at.Add(time.Second))
	if d.Phase != PhaseCanary || d.State.Step != 1 || d.Weight != 100 {
		t.Fatalf("the keep with its check passing: %s step %d weight %d (%s), want the keep going on", d.Phase, d.State.Step, d.Weight, d.State.Message)
	}
	var names []string
	for _, e := range d.State.Evaluations {
		names = append(names, fmt.Sprintf("%s=%s", e.Name, e.Value))
	}
	if got := strings.Join(names, ","); got != "smoke=-2,errors=-3" {
		t.Errorf("the keep's record %s, want smoke's preview value and errors' own (smoke=-2,errors=-3)", got)
	}
	// The keep, errors failing: switched back, naming it.
	if d := Next(plan, keep, Observation{Revision: "b", Deployed: "a", CanaryReady: true, Checks: []CheckResult{{}, {Value: 1}}, ChecksAt: at}, at.Add(time.Second)); d.Phase != PhaseRolledBack || !strings.Contains(d.State.Message, "check errors") {
		t.Errorf("the keep with errors failing: %s %q, want rolled back by errors", d.Phase, d.State.Message)
	}
	// The keep's pause over with a passing round of its own: promoted, smoke's part long past.
	late := keep.Since.Add(2*time.Minute + time.Second)
	if d := Next(plan, keep, Observation{Revision: "b", Deployed: "a", CanaryReady: true, Checks: []CheckResult{{}, {Value: -3}}, ChecksAt: late}, late.Add(time.Second)); d.Phase != PhasePromoting {
		t.Errorf("the keep over, its check passing: %s (%s), want promoting", d.Phase, d.State.Message)
	}
	// A round begun before errors' during was taken out (errors skipped) counts for nothing now that errors gates
	// the keep: never taken for a pass.
	both := plan
	both.Checks = []Check{smoke, {Name: "errors", Max: -1, Interval: 10 * time.Second}}
	if d := Next(both, keep, Observation{Revision: "b", Deployed: "a", CanaryReady: true, Checks: []CheckResult{{Skipped: true}, {Skipped: true}}, ChecksAt: late}, late.Add(time.Second)); d.Phase != PhaseCanary || len(d.State.Evaluations) != 1 {
		t.Errorf("a round that skipped a check the keep counts: %s, record %+v; want the keep waiting for a round of its own, smoke's record alone", d.Phase, d.State.Evaluations)
	}
	// A keep whose only check is the preview's: its pause alone, no round waited for.
	previewOnly := plan
	previewOnly.Checks = []Check{smoke}
	if d := Next(previewOnly, keep, Observation{Revision: "b", Deployed: "a", CanaryReady: true}, late); d.Phase != PhasePromoting {
		t.Errorf("the keep over with no check of its own: %s, want promoting", d.Phase)
	}
	if d := Next(previewOnly, keep, Observation{Revision: "b", Deployed: "a", CanaryReady: true}, keep.Since.Add(time.Minute)); d.After != time.Minute {
		t.Errorf("mid-keep with no check of its own: a look again in %s, want at the pause's end (1m0s)", d.After)
	}
}

// TestASmallerPreview: a blue/green whose preview is a share of the stable count (previewPercent) is counted for that
// share while it previews; past the preview its pods are counted for all of it, and the traffic (the route's, or
// the Service's switch) stays on the version before until every one is ready; a rollback in the preview, or before
// the switch's pods are all ready, keeps the preview's count while its pods retire (as a rollback of steps before a
// step's pods are ready keeps the step before's).
func TestASmallerPreview(t *testing.T) {
	t0 := time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC)
	plan := Plan{BlueGreen: true, Steps: []Step{{Pause: time.Minute, Gate: true, Size: 25}, {Weight: 100, Pause: 2 * time.Minute, Size: 100}}}
	switched := plan
	switched.Switched = true
	all := Traffic{Weight: 100}
	runNext(t, []nextCase{{
		name:  "a new version: previewed at a quarter of the stable count, with no traffic",
		plan:  plan,
		state: State{Stable: "a"},
		obs:   Observation{Revision: "b", Deployed: "a"},
		want:  Decision{State: State{Stable: "a", Canary: "b"}, Phase: PhaseCanary, ReplicaWeight: 25},
	}, {
		name:  "the preview ready at its count: its pause runs",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t0.Add(10 * time.Second),
		want:  Decision{State: State{Stable: "a", Canary: "b", Since: t0}, Phase: PhaseCanary, ReplicaWeight: 25, After: 50 * time.Second},
	}, {
		name:  "promoted at the gate: the switch's pods are counted for all of it, and its pause waits for them",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Since: t0, GateSince: t0.Add(2 * time.Minute)},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "promote b/0"},
		now:   t0.Add(3 * time.Minute),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 1, ActedOn: "promote b/0"}, Phase: PhaseCanary, ReplicaWeight: 100},
	}, {
		name:  "promoted at the gate, the stable count so small that a quarter is all of it: the warm-up starts now",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Since: t0, GateSince: t0.Add(2 * time.Minute)},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, NextStepReady: true, Action: "promote b/0"},
		now:   t0.Add(3 * time.Minute),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 1, Since: t0.Add(3 * time.Minute), ActedOn: "promote b/0"}, Phase: PhaseCanary, ReplicaWeight: 100, After: Warmup},
	}, {
		name:  "scaling to full size: no traffic yet",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Step: 1, ActedOn: "promote b/0"},
		obs:   Observation{Revision: "b", Deployed: "a"},
		now:   t0.Add(4 * time.Minute),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 1, ActedOn: "promote b/0"}, Phase: PhaseCanary, ReplicaWeight: 100},
	}, {
		name:  "switched by the Service, scaling to full size: the selector stays on the version before",
		plan:  switched,
		state: State{Stable: "a", Canary: "b", Step: 1, ActedOn: "promote b/0"},
		obs:   Observation{Revision: "b", Deployed: "a"},
		now:   t0.Add(4 * time.Minute),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 1, ActedOn: "promote b/0"}, Phase: PhaseCanary, ReplicaWeight: 100},
	}, {
		name:  "switched by the Service, every pod ready at full size: all the traffic at once",
		plan:  switched,
		state: State{Stable: "a", Canary: "b", Step: 1, ActedOn: "promote b/0"},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t0.Add(5 * time.Minute),
		want: Decision{State: State{Stable: "a", Canary: "b", Step: 1, Since: t0.Add(5 * time.Minute), ActedOn: "promote b/0"}, Phase: PhaseCanary, Traffic: all,
			ReplicaWeight: 100, After: 2 * time.Minute},
	}, {
		name:  "aborted while scaled up for the switch, before its pods were all ready: back to the preview's count while they retire",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Step: 1, ActedOn: "promote b/0"},
		obs:   Observation{Revision: "b", Deployed: "a", Action: "abort b"},
		now:   t0.Add(4 * time.Minute),
		want: Decision{State: State{Stable: "a", Failed: "b", Since: t0.Add(4 * time.Minute), ActedOn: "abort b", Reason: webappv2.ReasonAborted,
			Message: "aborted by a person (" + webappv2.AnnotationAction + ": abort b)"}, Phase: PhaseRolledBack, ReplicaWeight: 25, After: Retire},
	}, {
		name:  "rolled back from the preview, a look later: still the preview's count",
		plan:  plan,
		state: State{Stable: "a", Failed: "b", Since: t0.Add(4 * time.Minute), ActedOn: "abort b", Reason: webappv2.ReasonAborted},
		obs:   Observation{Revision: "b", Deployed: "a", Action: "abort b"},
		now:   t0.Add(4*time.Minute + 3*time.Second),
		want: Decision{State: State{Stable: "a", Failed: "b", Since: t0.Add(4 * time.Minute), ActedOn: "abort b", Reason: webappv2.ReasonAborted},
			Phase: PhaseRolledBack, ReplicaWeight: 25, After: 7 * time.Second},
	}, {
		name:  "steps: pods in trouble at step 2 before they are ready at its count: rolled back from step 1, its count kept while they retire",
		plan:  Plan{Steps: []Step{{Weight: 10, Pause: time.Minute}, {Weight: 50, Pause: time.Minute}}},
		state: State{Stable: "a", Canary: "b", Step: 1},
		obs:   Observation{Revision: "b", Deployed: "a", TroubleReason: webappv2.ReasonCrashLoopBackOff, TroubleMessage: "1/5 pods crash"},
		now:   t0,
		want: Decision{State: State{Stable: "a", Failed: "b", Since: t0, Reason: webappv2.ReasonCrashLoopBackOff, Message: "1/5 pods crash"},
			Phase: PhaseRolledBack, ReplicaWeight: 10, After: Retire},
	}, {
		name:  "aborted in the preview: its pods keep the preview's count while they retire",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "abort b"},
		now:   t0.Add(30 * time.Second),
		want: Decision{State: State{Stable: "a", Failed: "b", Since: t0.Add(30 * time.Second), ActedOn: "abort b", Reason: webappv2.ReasonAborted,
			Message: "aborted by a person (" + webappv2.AnnotationAction + ": abort b)"}, Phase: PhaseRolledBack, ReplicaWeight: 25, After: Retire},
	}})
}

// TestBlueGreen: a blue/green's preview runs the new version at full size with no traffic, through its pause and
// gate; the switch sends it all the traffic at once (once the gateway has had Warmup to learn its pods), the
// version before kept beside it; an abort then switches back at once; after the keep, the promotion keeps the
// traffic on the new version until the stable Deployment runs it, then moves it back.
func TestBlueGreen(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Hour)
	plan := Plan{BlueGreen: true, Steps: []Step{{Pause: time.Minute, Gate: true, Size: 100}, {Weight: 100, Pause: 2 * time.Minute, Size: 100}}}
	all := Traffic{Weight: 100}
	// Without a Gateway, the Service's selector switches: no warm-up.
	switched := plan
	switched.Switched = true
	noKeep := Plan{BlueGreen: true, Switched: true, Steps: []Step{{Pause: time.Minute, Gate: true, Size: 100}, {Weight: 100, Size: 100}}}
	runNext(t, []nextCase{{
		name:  "a new version: previewed at full size, with no traffic",
		plan:  plan,
		state: State{Stable: "a"},
		obs:   Observation{Revision: "b", Deployed: "a"},
		want:  Decision{State: State{Stable: "a", Canary: "b"}, Phase: PhaseCanary, ReplicaWeight: 100},
	}, {
		name:  "the preview ready: its pause runs, still no traffic",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t0.Add(10 * time.Second),
		want:  Decision{State: State{Stable: "a", Canary: "b", Since: t0}, Phase: PhaseCanary, ReplicaWeight: 100, After: 50 * time.Second},
	}, {
		name:  "the preview's pause over: its gate waits for a person",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Since: t0},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t0.Add(2 * time.Minute),
		want:  Decision{State: State{Stable: "a", Canary: "b", Since: t0, GateSince: t0.Add(2 * time.Minute)}, Phase: PhaseCanary, ReplicaWeight: 100},
	}, {
		name:  "promoted at the gate: the switch is next, its pods the preview's, ready: its warm-up starts now",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Since: t0, GateSince: t0.Add(2 * time.Minute)},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "promote b/0"},
		now:   t0.Add(3 * time.Minute),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 1, Since: t0.Add(3 * time.Minute), ActedOn: "promote b/0"}, Phase: PhaseCanary, ReplicaWeight: 100, After: Warmup},
	}, {
		name:  "the switch waits for the gateway to learn the pods",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Step: 1},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t1,
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 1, Since: t1}, Phase: PhaseCanary, ReplicaWeight: 100, After: Warmup},
	}, {
		name:  "switched: all the traffic to the new version, the version before kept",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t1},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t1.Add(10 * time.Second),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 1, Since: t1}, Phase: PhaseCanary, Traffic: all, ReplicaWeight: 100, After: 110 * time.Second},
	}, {
		name:  "an abort after the switch: all the traffic back at once",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t1},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "abort b"},
		now:   t1.Add(30 * time.Second),
		want: Decision{State: State{Stable: "a", Failed: "b", Step: 1, Since: t1.Add(30 * time.Second), ActedOn: "abort b", Reason: webappv2.ReasonAborted,
			Message: "aborted by a person (" + webappv2.AnnotationAction + ": abort b)"}, Phase: PhaseRolledBack, ReplicaWeight: 100, After: Retire},
	}, {
		name:  "promoted at the gate under an HPA: the switch holds the stable count it has, as the HPA's floor",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Since: t0, GateSince: t0.Add(2 * time.Minute)},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "promote b/0", StableReplicas: 6},
		now:   t0.Add(3 * time.Minute),
		want: Decision{State: State{Stable: "a", Canary: "b", Step: 1, Since: t0.Add(3 * time.Minute), ActedOn: "promote b/0", Held: 6}, Phase: PhaseCanary, ReplicaWeight: 100,
			After: Warmup},
	}, {
		name:  "held through the keep, the HPA's count higher now: the count at the switch stays held",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t1, Held: 6},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, StableReplicas: 8},
		now:   t1.Add(10 * time.Second),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 1, Since: t1, Held: 6}, Phase: PhaseCanary, Traffic: all, ReplicaWeight: 100, After: 110 * time.Second},
	}, {
		name:  "held, then aborted: the floor is given back",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t1, Held: 6},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "abort b"},
		now:   t1.Add(30 * time.Second),
		want: Decision{State: State{Stable: "a", Failed: "b", Step: 1, Since: t1.Add(30 * time.Second), ActedOn: "abort b", Reason: webappv2.ReasonAborted,
			Message: "aborted by a person (" + webappv2.AnnotationAction + ": abort b)"}, Phase: PhaseRolledBack, ReplicaWeight: 100, After: Retire},
	}, {
		name:  "held through the promotion: given back once the stable Deployment serves the new version",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Step: 2, Since: t1, Held: 6},
		obs:   Observation{Revision: "b", Deployed: "b", StableRolledOut: true},
		now:   t1.Add(Retire),
		want:  Decision{State: State{Stable: "b"}, Phase: PhaseStable},
	}, {
		name:  "the spec set back to the version before after the switch: all the traffic back at once, the new version's pods retiring",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t1},
		obs:   Observation{Revision: "a", Deployed: "a", CanaryReady: true},
		now:   t1.Add(30 * time.Second),
		want:  Decision{State: State{Stable: "a", Retiring: "b", RetiringSince: t1.Add(30 * time.Second)}, Phase: PhaseStable, After: Retire},
	}, {
		name:  "a newer version while the stable Deployment rolls to the switched one: it is stable, the route leaves the new version's pods, which retire",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Step: 2},
		obs:   Observation{Revision: "c", Deployed: "b"},
		now:   t1,
		want:  Decision{State: State{Stable: "b", Canary: "c", Retiring: "b", RetiringSince: t1}, Phase: PhaseCanary, ReplicaWeight: 100, After: Retire},
	}, {
		name:  "pods in trouble after the switch: all the traffic back at once",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t1},
		obs:   Observation{Revision: "b", Deployed: "a", TroubleReason: webappv2.ReasonCrashLoopBackOff, TroubleMessage: "1/3 pods crash"},
		now:   t1.Add(30 * time.Second),
		want: Decision{State: State{Stable: "a", Failed: "b", Step: 1, Since: t1.Add(30 * time.Second), Reason: webappv2.ReasonCrashLoopBackOff,
			Message: "1/3 pods crash"}, Phase: PhaseRolledBack, ReplicaWeight: 100, After: Retire},
	}, {
		name:  "the keep over: promoted, the traffic stays on the new version while the stable Deployment rolls",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t1},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t1.Add(3 * time.Minute),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 2}, Phase: PhasePromoting, Traffic: all, ReplicaWeight: 100},
	}, {
		name:  "the stable Deployment runs the new version: the traffic moves back to it, the canary's pods retire",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Step: 2},
		obs:   Observation{Revision: "b", Deployed: "b", StableRolledOut: true},
		now:   t1.Add(5 * time.Minute),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 2, Since: t1.Add(5 * time.Minute)}, Phase: PhasePromoting, ReplicaWeight: 100, After: Retire},
	}, {
		name:  "the traffic back on the stable Deployment, then a stable pod not ready: the traffic stays off the canary, whose pods retire",
		plan:  plan,
		state: State{Stable: "a", Canary: "b", Step: 2, Since: t1},
		obs:   Observation{Revision: "b", Deployed: "b"},
		now:   t1.Add(3 * time.Second),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 2, Since: t1}, Phase: PhasePromoting, ReplicaWeight: 100, After: 7 * time.Second},
	}, {
		name:  "switched by the Service, promoted all the way at the gate: all the traffic at once, and a look a second later",
		plan:  switched,
		state: State{Stable: "a", Canary: "b", Since: t0, GateSince: t0.Add(2 * time.Minute)},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "promote b/full"},
		now:   t0.Add(3 * time.Minute),
		want: Decision{State: State{Stable: "a", Canary: "b", Step: 1, Since: t0.Add(3 * time.Minute), ActedOn: "promote b/full"}, Phase: PhaseCanary, Traffic: all,
			ReplicaWeight: 100, After: time.Second},
	}, {
		name:  "switched by the Service (no Gateway): promoted at the gate, all the traffic at once, no warm-up, the keep from now",
		plan:  switched,
		state: State{Stable: "a", Canary: "b", Since: t0, GateSince: t0.Add(2 * time.Minute)},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "promote b/0"},
		now:   t0.Add(3 * time.Minute),
		want: Decision{State: State{Stable: "a", Canary: "b", Step: 1, Since: t0.Add(3 * time.Minute), ActedOn: "promote b/0"}, Phase: PhaseCanary, Traffic: all,
			ReplicaWeight: 100, After: 2 * time.Minute},
	}, {
		name:  "switched by the Service, a look later: the traffic stays, the keep runs",
		plan:  switched,
		state: State{Stable: "a", Canary: "b", Step: 1, Since: t1},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true},
		now:   t1.Add(time.Second),
		want:  Decision{State: State{Stable: "a", Canary: "b", Step: 1, Since: t1}, Phase: PhaseCanary, Traffic: all, ReplicaWeight: 100, After: 2*time.Minute - time.Second},
	}, {
		name:  "switched by the Service with no keep: a look again a second later, which promotes",
		plan:  noKeep,
		state: State{Stable: "a", Canary: "b", Since: t0, GateSince: t0.Add(2 * time.Minute)},
		obs:   Observation{Revision: "b", Deployed: "a", CanaryReady: true, Action: "promote b/0"},
		now:   t0.Add(3 * time.Minute),
		want: Decision{State: State{Stable: "a", Canary: "b", Step: 1, Since: t0.Add(3 * time.Minute), ActedOn: "promote b/0"}, Phase: PhaseCanary, Traffic: all,
			ReplicaWeight: 100, After: time.Second},
	}})
}

// TestDropped: a strategy taken out of the spec leaves no canary; the pods of the one that ran retire first when the
// route sent them traffic (at a later step, once ready at the first, or being promoted), as do a rolled-back one's
// still retiring; the retiring pods go once Retire has passed.
func TestDropped(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	for _, tc := range []struct {
		name      string
		state     State
		promoting bool
		want      Decision
	}{
		{"no canary: nothing to retire", State{Stable: "a"}, false, Decision{State: State{}, Phase: PhaseStable}},
		{"a canary not yet ready at its first step: the route sent it nothing", State{Stable: "a", Canary: "b"}, false,
			Decision{State: State{}, Phase: PhaseStable}},
		{"a canary ready at its first step: it retires", State{Stable: "a", Canary: "b", Since: t0}, false,
			Decision{State: State{Retiring: "b", RetiringSince: now}, Phase: PhaseStable, After: Retire}},
		{"a canary at its second step: it retires", State{Stable: "a", Canary: "b", Step: 1}, false,
			Decision{State: State{Retiring: "b", RetiringSince: now}, Phase: PhaseStable, After: Retire}},
		{"a canary being promoted: it retires", State{Stable: "a", Canary: "b", Step: 2}, true,
			Decision{State: State{Retiring: "b", RetiringSince: now}, Phase: PhaseStable, After: Retire}},
		{"a rolled-back canary retiring: it goes on retiring", State{Stable: "a", Failed: "b", Since: t0.Add(55 * time.Second)}, false,
			Decision{State: State{Retiring: "b", RetiringSince: t0.Add(55 * time.Second)}, Phase: PhaseStable, After: 5 * time.Second}},
		{"retiring already: until Retire has passed", State{Stable: "a", Retiring: "b", RetiringSince: t0.Add(52 * time.Second)}, false,
			Decision{State: State{Retiring: "b", RetiringSince: t0.Add(52 * time.Second)}, Phase: PhaseStable, After: 2 * time.Second}},
		{"retired: nothing left", State{Stable: "a", Retiring: "b", RetiringSince: t0}, false, Decision{State: State{}, Phase: PhaseStable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Dropped(tc.state, tc.promoting, false, Retire, Observation{}, now); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Dropped:\n got %+v\nwant %+v", got, tc.want)
			}
			// Behind the one Service, nothing retires: its pods leave it as any pod going does.
			if got := Dropped(tc.state, tc.promoting, true, Retire, Observation{}, now); got.State.Retiring != "" {
				t.Errorf("Dropped without a route: %+v retires", got.State)
			}
		})
	}
}

// TestPodsStayRetireAfterTheWriteThatTookTheTrafficOff: a canary's pods that the traffic left stay canary.Retire after
// the decision that took it off them, and Retire after our write of the route or the switch that did (a switch back
// refused, then written late), and as long as that write has not succeeded; a clock far ahead holds them no longer.
func TestPodsStayRetireAfterTheWriteThatTookTheTrafficOff(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 22, 0, 0, 0, time.UTC)
	now := t0.Add(12 * time.Second)
	plan := Plan{Steps: []Step{{Weight: 0, Pause: time.Minute, Size: 100, Gate: true}, {Weight: 100, Size: 100}}, BlueGreen: true, Switched: true}
	type want struct {
		kept  bool
		after time.Duration
		// held: kept only because the traffic is still on them.
		held bool
	}
	for _, o := range []struct {
		name string
		obs  Observation
		want want
	}{
		{"the write took the traffic off at the decision: they go Retire after it", Observation{TrafficLeft: t0.Add(time.Second)}, want{}},
		{"none of our writes known: Retire after the decision", Observation{}, want{}},
		{"the write refused still: kept, until its retry", Observation{TrafficOnCanary: true, TrafficLeft: t0.Add(-time.Minute)}, want{kept: true, held: true}},
		{"the write succeeded late: Retire after it", Observation{TrafficLeft: t0.Add(11 * time.Second)}, want{kept: true, after: 9 * time.Second}},
		{"a server's clock a little ahead: Retire at most from now", Observation{TrafficLeft: now.Add(5 * time.Second)}, want{kept: true, after: Retire}},
		{"a server's clock far ahead: not held by it", Observation{TrafficLeft: now.Add(time.Hour)}, want{}},
	} {
		for _, c := range []struct {
			name  string
			state State
			rev   string
			obs   Observation
		}{
			{"rolled back", State{Stable: "a", Failed: "b", Step: 1, Since: t0}, "b", Observation{}},
			{"left by the spec", State{Stable: "a", Retiring: "b", RetiringSince: t0}, "a", Observation{}},
			{"promoted", State{Stable: "a", Canary: "b", Step: 2, Since: t0}, "b", Observation{Deployed: "b", StableRolledOut: true}},
		} {
			t.Run(c.name+"/"+o.name, func(t *testing.T) {
				obs := c.obs
				obs.Revision, obs.TrafficOnCanary, obs.TrafficLeft = c.rev, o.obs.TrafficOnCanary, o.obs.TrafficLeft
				if obs.Deployed == "" {
					obs.Deployed = "a"
				}
				d := Next(plan, c.state, obs, now)
				kept := d.ReplicaWeight > 0 || d.State.Retiring != ""
				if kept != o.want.kept || d.After != o.want.after || d.HeldUnderTraffic != o.want.held {
					t.Errorf("Next: pods kept %v (under traffic %v), look again after %s; want %v (%v), %s (%+v)", kept, d.HeldUnderTraffic, d.After, o.want.kept, o.want.held, o.want.after, d)
				}
			})
		}
		t.Run("the strategy taken out/"+o.name, func(t *testing.T) {
			d := Dropped(State{Stable: "a", Canary: "b", Step: 1, Since: t0}, false, false, Retire, o.obs, t0)
			d = Dropped(d.State, false, false, Retire, o.obs, now)
			if kept := d.State.Retiring != ""; kept != o.want.kept || d.After != o.want.after || d.HeldUnderTraffic != o.want.held {
				t.Errorf("Dropped: pods kept %v, look again after %s; want %v, %s (%+v)", kept, d.After, o.want.kept, o.want.after, d)
			}
		})
	}
}

// TestARetireIsNotHeldByTheNextCanarysTraffic: pods retiring while the canary's Service already carries the next
// canary's traffic (their Deployment deleted by someone, the next one's created in its place) are not held by that
// traffic, nor by the route's writes for it: the retire ends Retire after it began, and the next canary goes on.
func TestARetireIsNotHeldByTheNextCanarysTraffic(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 22, 0, 0, 0, time.UTC)
	plan := Plan{Steps: []Step{{Weight: 20, Pause: time.Minute}, {Weight: 50, Pause: time.Minute}}}
	s := State{Stable: "a", Canary: "c", Step: 1, Since: t0, Retiring: "b", RetiringSince: t0}
	now := t0.Add(Retire + time.Second)
	d := Next(plan, s, Observation{Revision: "c", Deployed: "a", CanaryReady: true, TrafficOnCanary: true, TrafficLeft: now.Add(-time.Second)}, now)
	if d.State.Retiring != "" || d.HeldUnderTraffic {
		t.Errorf("the retire is held by the next canary's traffic: %+v", d)
	}
}

// TestRetireSeconds: the plan's Retire (spec.rollout.canary.retireSeconds) is how long the pods the traffic left stay,
// after a rollback, a promotion and a spec that leaves them, counted from the decision or the write; unset, Retire.
func TestRetireSeconds(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 23, 0, 0, 0, time.UTC)
	steps := []Step{{Weight: 20, Pause: time.Minute}, {Weight: 50, Pause: time.Minute}}
	for _, c := range []struct {
		name  string
		state State
		obs   Observation
	}{
		{"rolled back", State{Stable: "a", Failed: "b", Step: 1, Since: t0}, Observation{Revision: "b", Deployed: "a"}},
		{"left by the spec", State{Stable: "a", Retiring: "b", RetiringSince: t0}, Observation{Revision: "a", Deployed: "a"}},
		{"promoted", State{Stable: "a", Canary: "b", Step: 2, Since: t0}, Observation{Revision: "b", Deployed: "b", StableRolledOut: true}},
		{"the write late", State{Stable: "a", Failed: "b", Step: 1, Since: t0}, Observation{Revision: "b", Deployed: "a", TrafficLeft: t0.Add(10 * time.Second)}},
	} {
		for _, r := range []struct {
			retire, at time.Duration
			kept       bool
		}{
			{0, 9 * time.Second, true}, {0, 11 * time.Second, c.name == "the write late"}, {0, 21 * time.Second, false},
			{30 * time.Second, 29 * time.Second, true}, {30 * time.Second, 31 * time.Second, c.name == "the write late"}, {30 * time.Second, 41 * time.Second, false},
		} {
			t.Run(fmt.Sprintf("%s, retire %s, at %s", c.name, r.retire, r.at), func(t *testing.T) {
				d := Next(Plan{Steps: steps, Retire: r.retire}, c.state, c.obs, t0.Add(r.at))
				if kept := d.ReplicaWeight > 0 || d.State.Retiring != ""; kept != r.kept {
					t.Errorf("pods kept %v, want %v: %+v", kept, r.kept, d)
				}
			})
		}
	}
	if got := (Plan{}).RetireAfter(); got != Retire {
		t.Errorf("unset: %s, want %s", got, Retire)
	}
	// A short retire keeps the default's tolerance of a clock ahead of ours (a leader before this one, the API
	// server's): since, or the write, 3 s ahead still hold the pods, 2 s at most from now.
	short := Plan{Steps: steps, Retire: 2 * time.Second}
	if d := Next(short, State{Stable: "a", Retiring: "b", RetiringSince: t0.Add(3 * time.Second)}, Observation{Revision: "a", Deployed: "a"}, t0); d.State.Retiring != "b" || d.After != 2*time.Second {
		t.Errorf("a since 3 s ahead with a retire of 2 s: %+v, want kept 2 s", d)
	}
	if d := Next(short, State{Stable: "a", Failed: "b", Step: 1, Since: t0.Add(-time.Minute)}, Observation{Revision: "b", Deployed: "a", TrafficLeft: t0.Add(3 * time.Second)}, t0); d.ReplicaWeight == 0 || d.After != 2*time.Second {
		t.Errorf("a write 3 s ahead with a retire of 2 s: %+v, want kept 2 s", d)
	}
}
