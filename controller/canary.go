package controller

import (
	"fmt"
	"math"
	"strconv"
	"time"

	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// The canary's step machine (issue 32): a pure function of the plan (the spec's strategy, defaults applied), the
// state the rollout has reached (kept in the WebApp's status, so a restart or a leader change resumes it at the same
// step) and what this reconcile observed. It decides the next state and the traffic the canary gets; the builders
// turn that into both Deployments, both Services and the route's weights (canary_run.go).

// canaryPlan is a canary strategy with its defaults applied.
type canaryPlan struct {
	steps  []canaryStep
	checks []canaryCheck
}

// canaryStep sends weight percent of the traffic to the canary, then pauses: the canary must be ready at that
// weight, and the pause run out with every check passing, before the next step.
type canaryStep struct {
	weight int32
	pause  time.Duration
}

// canaryCheck is a query whose value must not exceed max; failuresAllowed failures are tolerated within one canary.
type canaryCheck struct {
	name            string
	max             float64
	interval        time.Duration
	failuresAllowed int32
}

// canaryPhase is where the rollout is.
type canaryPhase string

const (
	// phaseStable: no canary; the stable version serves everything.
	phaseStable canaryPhase = "Stable"
	// phaseCanary: the canary runs beside the stable version and gets its step's weight.
	phaseCanary canaryPhase = "Canary"
	// phasePromoting: every step passed; the stable Deployment is rolling to the canary's version.
	phasePromoting canaryPhase = "Promoting"
	// phaseRolledBack: the canary was stopped; the stable version serves everything until the spec changes.
	phaseRolledBack canaryPhase = "RolledBack"
)

// canaryState is what the rollout has reached. It lives in the WebApp's status: it changes at a step's start and
// end, on a check's failure and on a rollback, never while a step pauses, so a pause costs no write.
type canaryState struct {
	// stable is the revision (the pod template's hash) of the version that serves; canary the one being tried
	// ("" when none); failed the last one rolled back (re-applying it does not start it again).
	stable, canary, failed string
	// step is the index of the canary's step; len(plan.steps) while promoting.
	step int
	// since is when the step's pause started: when the canary was first seen ready at its weight (zero: not yet).
	since time.Time
	// failures counts each check's failures in this canary, in the plan's order.
	failures []int32
	// reason and message say why the last canary was rolled back (a pod trouble reason, or CheckFailed).
	reason, message string
}

// canaryObservation is what a reconcile saw of the two versions.
type canaryObservation struct {
	// revision is the spec's pod template's; deployed the stable Deployment's ("" when it does not exist yet).
	revision, deployed string
	// canaryReady: the canary Deployment has as many available pods as its step's weight asks for.
	canaryReady bool
	// troubleReason and troubleMessage are the canary's pods' trouble (podTrouble), "" when none.
	troubleReason, troubleMessage string
	// checks are the results of the round of checks that ended since the last reconcile, in the plan's order (nil:
	// none ended); checksAt is when that round started.
	checks   []checkResult
	checksAt time.Time
	// stableRolledOut: the stable Deployment runs the canary's revision and its rollout is complete.
	stableRolledOut bool
}

// checkResult is one evaluation of a check: its value, or why it could not be had (an error counts as a failure).
type checkResult struct {
	value float64
	err   error
}

// canaryDecision is what the step machine decided.
type canaryDecision struct {
	state canaryState
	phase canaryPhase
	// weight is the canary's share of the traffic, in percent: its step's once it is ready there, the step
	// before's until then (so a route never sends traffic to pods not ready for it).
	weight int32
	// replicaWeight is the share the canary's pods are counted for (0: no canary Deployment).
	replicaWeight int32
	// after is when to look again without an event (a pause's end, a check's interval); zero: on events only.
	after time.Duration
}

// nextCanary decides the rollout's next state from the plan, the state reached and what was observed at now.
func nextCanary(plan canaryPlan, s canaryState, obs canaryObservation, now time.Time) canaryDecision {
	switch {
	case s.stable == "":
		// The first version, or a WebApp that just took the strategy: what the stable Deployment runs is stable
		// (nothing runs yet: the spec's version is), and a spec asking for another is its canary.
		s.stable = obs.revision
		if obs.deployed != "" {
			s.stable = obs.deployed
		}
		if s.stable != obs.revision {
			return startCanary(plan, s, obs)
		}
		return canaryDecision{state: s, phase: phaseStable}
	case obs.revision == s.stable:
		// The spec is back at the stable version (a canary abandoned by the user, or none): nothing to try. A
		// failed revision stays known, so applying it again still does not loop.
		s.canary, s.step, s.since, s.failures = "", 0, time.Time{}, nil
		return canaryDecision{state: s, phase: phaseStable}
	case obs.revision == s.failed:
		// The version rolled back (applied again, or still): it stays rolled back, rather than loop. Its pods stay
		// canaryRetire after the traffic left them, counted from since.
		if !s.since.IsZero() {
			if left := s.since.Add(canaryRetire).Sub(now); left > 0 {
				return canaryDecision{state: s, phase: phaseRolledBack, replicaWeight: plan.steps[min(s.step, len(plan.steps)-1)].weight, after: left}
			}
			s.step, s.since = 0, time.Time{}
		}
		return canaryDecision{state: s, phase: phaseRolledBack}
	case s.canary == "" && obs.deployed == "":
		// A new version while no stable Deployment runs and no canary is under way (the Deployment API refused
		// the stable version, or it is not created yet): there is no traffic to protect, and a canary beside a
		// version that cannot run would hold the new one back for ever. The spec's version is stable, as the first
		// one is.
		s.stable, s.step, s.since, s.failures = obs.revision, 0, time.Time{}, nil
		return canaryDecision{state: s, phase: phaseStable}
	case obs.revision != s.canary:
		// A new version (or one changed mid-canary): its canary starts from the first step. One that comes while
		// another is promoted starts beside it: the stable Deployment already runs (or rolls to) the promoted one.
		if s.canary != "" && s.step >= len(plan.steps) {
			s.stable = s.canary
		}
		return startCanary(plan, s, obs)
	}
	if s.step >= len(plan.steps) {
		return promote(plan, s, obs, now)
	}
	if obs.troubleReason != "" {
		// The canary's pods cannot run: traffic goes back to stable at once.
		return rollBack(plan, s, obs.troubleReason, obs.troubleMessage, now)
	}
	failing := ""
	for i, c := range plan.checks {
		if i >= len(obs.checks) {
			break
		}
		if ok, said := passes(c, obs.checks[i]); !ok {
			s.failures = countFailure(s.failures, len(plan.checks), i)
			if s.failures[i] > c.failuresAllowed {
				return rollBack(plan, s, webappv2.ReasonCheckFailed, fmt.Sprintf("check %s: %s (failures %d, allowed %d)", c.name, said, s.failures[i], c.failuresAllowed), now)
			}
			failing = c.name
		}
	}
	step := plan.steps[s.step]
	d := canaryDecision{state: s, phase: phaseCanary, weight: step.weight, replicaWeight: step.weight}
	if !obs.canaryReady {
		// The pause starts once the canary serves its weight; until then, its pods' events bring us back, and the
		// traffic stays at the step before's.
		d.weight = weightBefore(plan, s.step)
		return d
	}
	if s.since.IsZero() {
		d.state.since = now
	}
	if warm := d.state.since.Add(canaryWarmup).Sub(now); warm > 0 {
		// Ready just now: the gateway learns the new pods' endpoints first, then gets the route's new weight.
		d.weight = weightBefore(plan, s.step)
		d.after = warm
		return d
	}
	if left := d.state.since.Add(step.pause).Sub(now); left > 0 {
		d.after = min(left, nextCheck(plan))
		return d
	}
	if len(plan.checks) > 0 && (len(obs.checks) < len(plan.checks) || failing != "" || obs.checksAt.Before(d.state.since.Add(step.pause))) {
		// The pause is over, but the step passes only on every check's passing result, taken after it.
		d.after = nextCheck(plan)
		return d
	}
	d.state.step++
	d.state.since = time.Time{}
	if d.state.step >= len(plan.steps) {
		return promote(plan, d.state, obs, now)
	}
	// The next step's pods are not there yet: the traffic stays until they are ready.
	d.replicaWeight = plan.steps[d.state.step].weight
	return d
}

// weightBefore is the traffic of the step before step i (none before the first).
func weightBefore(plan canaryPlan, i int) int32 {
	if i <= 0 {
		return 0
	}
	return plan.steps[i-1].weight
}

// startCanary starts a canary of obs.revision at the first step.
// What this reconcile saw of a canary belongs to the version before, so nothing else follows from it yet.
func startCanary(plan canaryPlan, s canaryState, obs canaryObservation) canaryDecision {
	s.canary, s.step, s.since, s.failures, s.reason, s.message = obs.revision, 0, time.Time{}, nil, "", ""
	if len(plan.steps) == 0 {
		return promote(plan, s, canaryObservation{}, time.Time{})
	}
	return canaryDecision{state: s, phase: phaseCanary, replicaWeight: plan.steps[0].weight}
}

// canaryWarmup is how long after a canary's pods are ready at a step's count its weight reaches the route: the
// time a gateway takes to learn new endpoints (Traefik applies a provider's changes every 2 s), so no request is
// sent to a backend the gateway still knows no server of. The step's pause includes it.
const canaryWarmup = 5 * time.Second

// canaryRetire is how long a promoted canary's pods stay after the traffic left them: the gateway follows the
// route's new weights within moments, and requests on their way to the canary are still answered.
const canaryRetire = 10 * time.Second

// promote rolls the stable Deployment to the canary's version; the canary keeps the last step's weight until the
// stable one has rolled out. Then the traffic leaves the canary, its pods stay canaryRetire longer (counted from
// since), and stable is the new version.
func promote(plan canaryPlan, s canaryState, obs canaryObservation, now time.Time) canaryDecision {
	var w int32
	if n := len(plan.steps); n > 0 {
		w = plan.steps[n-1].weight
	}
	if s.step < len(plan.steps) {
		// Just promoted: the stable Deployment rolls from now on.
		s.step, s.since = len(plan.steps), time.Time{}
		obs.stableRolledOut = false
	}
	if !obs.stableRolledOut {
		return canaryDecision{state: s, phase: phasePromoting, weight: w, replicaWeight: w}
	}
	if s.since.IsZero() {
		s.since = now
	}
	if left := s.since.Add(canaryRetire).Sub(now); left > 0 {
		return canaryDecision{state: s, phase: phasePromoting, replicaWeight: w, after: left}
	}
	s.stable, s.canary, s.failed, s.step, s.since, s.failures = s.canary, "", "", 0, time.Time{}, nil
	return canaryDecision{state: s, phase: phaseStable}
}

// rollBack stops the canary, saying why: the stable version serves everything from now, and the canary's pods go
// canaryRetire later (the gateway follows the route first); step stays the one it failed at.
func rollBack(plan canaryPlan, s canaryState, reason, message string, now time.Time) canaryDecision {
	s.failed, s.canary, s.since, s.failures = s.canary, "", now, nil
	s.reason, s.message = reason, message
	return canaryDecision{state: s, phase: phaseRolledBack, replicaWeight: plan.steps[min(s.step, len(plan.steps)-1)].weight, after: canaryRetire}
}

// passes reports whether a check's result passes, and what it said.
func passes(c canaryCheck, r checkResult) (bool, string) {
	switch {
	case r.err != nil:
		return false, r.err.Error()
	case math.IsNaN(r.value):
		return false, "no value"
	case math.IsInf(r.value, 0):
		// -Inf is below every max, yet measures nothing: only a finite number passes.
		return false, formatValue(r.value) + " is not a finite number"
	case r.value > c.max:
		return false, fmt.Sprintf("%s > %s", formatValue(r.value), formatValue(c.max))
	}
	return true, ""
}

func formatValue(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// countFailure adds a failure of check i to failures, sized to n checks.
func countFailure(failures []int32, n, i int) []int32 {
	out := make([]int32, n)
	copy(out, failures)
	out[i]++
	return out
}

// nextCheck is the shortest check interval (a pause without checks waits for its end alone).
func nextCheck(plan canaryPlan) time.Duration {
	d := time.Duration(math.MaxInt64)
	for _, c := range plan.checks {
		d = min(d, c.interval)
	}
	return d
}
